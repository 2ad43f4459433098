/** `GET /admin/schema`: every registered resource with its fields, search, sort, paging, bulk, guards and cascade. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, envelope, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';

let t: TestApp;
let user: { key: string; tenantId: string };
let tenantAdmin: { key: string; tenantId: string };

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin] });
  user = await createTenantUser(t, { features: ['tasks'] });
  tenantAdmin = await createTenantUser(t, { tenantId: user.tenantId, roles: ['admin'] });
});
afterAll(() => t?.close());

const schema = async () => {
  const res = await t.http('GET', '/admin/schema');
  expect(res.status).toBe(200);
  return res.body.resources as any[];
};
const resource = async (name: string) => (await schema()).find((r) => r.name === name);

describe('access', () => {
  it('a plain user gets 403 ACCESS_DENIED', async () => {
    const res = await t.http('GET', '/admin/schema', { key: user.key });
    expect(res.status).toBe(403);
    expect(envelope(res).code).toBe('ACCESS_DENIED');
    expect(JSON.stringify(res.body)).not.toContain('searchable_fields');
  });

  it('no credential gets 401 AUTH_REQUIRED', async () => {
    const res = await t.http('GET', '/admin/schema', { key: null });
    expect(res.status).toBe(401);
    expect(envelope(res).code).toBe('AUTH_REQUIRED');
  });

  it('a tenant admin and the system admin get it', async () => {
    expect((await t.http('GET', '/admin/schema', { key: tenantAdmin.key })).status).toBe(200);
    expect((await t.http('GET', '/admin/schema')).status).toBe(200);
  });
});

describe('content', () => {
  it('lists projects and tasks with their paths', async () => {
    const all = await schema();
    expect(all.map((r) => [r.name, r.path])).toEqual([
      ['projects', '/projects'],
      ['tasks', '/tasks'],
    ]);
  });

  it.each<[string, string, Record<string, unknown>]>([
    ['projects', 'name', { type: 'string', required: true }],
    ['projects', 'description', { type: 'string', required: false }],
    ['projects', 'status', { type: 'string', enum: ['active', 'archived'] }],
    ['projects', 'tags', { type: 'array', items: 'string' }],
    ['projects', 'budget', { type: 'number' }],
    ['projects', 'owner_email', { type: 'string' }],
    ['tasks', 'project_id', { type: 'objectId', required: true, ref: 'projects' }],
    ['tasks', 'title', { type: 'string', required: true }],
    ['tasks', 'done', { type: 'boolean' }],
    ['tasks', 'priority', { type: 'integer', min: 1, max: 5 }],
    ['tasks', 'due_at', { type: 'date' }],
  ])('%s.%s field description', async (res, field, expected) => {
    const r = await resource(res);
    const f = r.fields.find((x: any) => x.name === field);
    expect(f).toMatchObject({ name: field, ...expected });
  });

  it('fields are exactly the client fields (no base fields)', async () => {
    expect((await resource('projects')).fields.map((f: any) => f.name)).toEqual(['name', 'description', 'status', 'tags', 'budget', 'owner_email']);
    expect((await resource('tasks')).fields.map((f: any) => f.name)).toEqual(['project_id', 'title', 'done', 'priority', 'due_at', 'tags']);
  });

  it('projects: search, sort, paging, bulk flags, no guards, referenced by tasks (deny)', async () => {
    expect(await resource('projects')).toMatchObject({
      tenant_scoped: true,
      searchable_fields: ['name', 'description'],
      default_sort: '-created_at',
      default_page_size: 25,
      max_page_size: 100,
      allow_bulk_create: true,
      allow_bulk_delete: true,
      guards: { features: [], attributes: [] },
      cascade: [],
      populatable: [],
      referenced_by: [{ resource: 'tasks', field: 'project_id', on_delete: 'deny' }],
      gdpr_fields: ['owner_email'],
      subject_field: 'created_by',
    });
  });

  it('tasks: feature guard, cascade rule to projects (deny), populatable project_id, no bulk', async () => {
    expect(await resource('tasks')).toMatchObject({
      searchable_fields: ['title'],
      default_sort: '-created_at',
      default_page_size: 25,
      max_page_size: 100,
      allow_bulk_create: false,
      allow_bulk_delete: false,
      guards: { features: ['tasks'], attributes: [] },
      cascade: [{ field: 'project_id', references: 'projects', on_delete: 'deny' }],
      populatable: ['project_id'],
      referenced_by: [],
      gdpr_fields: [],
      subject_field: 'created_by',
    });
  });
});
