/**
 * `actions` of a resource type over GraphQL (`resourceTypes`): what the caller may do to the
 * resource at all, of create and delete, decided by its guards and the caller's roles as those
 * calls decide. Every action listed is done, every one left out is refused (403); a resource whose
 * feature the caller lacks lists none; a role of one tenant gives nothing in another.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { sampleResources } from '../../plugins/resources/sample-resources.ts';
import { accessPlugin } from '../../plugins/access/index.ts';
import { createRole, newTenant, userWith } from '../access/helpers.ts';
import { ifMatch } from './write-helpers.ts';

type User = { userId: string; key: string };
let t: TestApp;
let tenant: string;
let admin: User;
let pat: User; // built-in user role, no rules
let reader: User; // read only
let creator: User; // read and create
let remover: User; // read and delete

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: sampleResources }), accessPlugin], checkResponses: false });
  tenant = await newTenant(t);
  await createRole(t, { name: 'reader', permissions: { projects: { read: true } } }, { tenantId: tenant });
  await createRole(t, { name: 'creator', permissions: { projects: { read: true, create: true } } }, { tenantId: tenant });
  await createRole(t, { name: 'remover', permissions: { projects: { read: true, delete: true } } }, { tenantId: tenant });
  admin = await userWith(t, tenant, ['user', 'admin']);
  pat = await userWith(t, tenant, ['user']);
  reader = await userWith(t, tenant, ['reader']);
  creator = await userWith(t, tenant, ['creator']);
  remover = await userWith(t, tenant, ['remover']);
});
afterAll(() => t?.close());

/** `actions` of each resource type, as `who` reads them. */
async function actionsOf(who: User): Promise<Record<string, string[]>> {
  const res = await t.gql<{ resourceTypes: { name: string; actions: string[] }[] }>('{ resourceTypes { name actions } }', {}, { key: who.key });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return Object.fromEntries(res.body.data!.resourceTypes.map((r) => [r.name, r.actions]));
}

/** The call behind each action on `/projects`, as `who`: its status (a document of the administrator's to delete). */
async function attempt(action: 'create' | 'delete', who: User): Promise<number> {
  if (action === 'create') return (await t.http('POST', '/projects', { key: who.key, json: { name: `made by ${who.userId}` } })).status;
  const made = await t.http('POST', '/projects', { key: admin.key, json: { name: 'to delete' } });
  expect(made.status).toBe(201);
  return (await t.http('DELETE', `/projects/${made.body._id as string}`, { key: who.key, headers: ifMatch('"1"') })).status;
}

describe('resource actions', () => {
  it('lists create and delete as the caller\'s roles allow them; each listed one is done, each left out refused', async () => {
    const cases: [string, User, string[]][] = [
      ['administrator', admin, ['create', 'delete']],
      ['reader', reader, []],
      ['creator', creator, ['create']],
      ['remover', remover, ['delete']],
    ];
    for (const [name, who, expected] of cases) {
      expect((await actionsOf(who)).projects, name).toEqual(expected);
      for (const action of ['create', 'delete'] as const) {
        const status = await attempt(action, who);
        if (expected.includes(action)) expect(status, `${name} ${action}`).toBe(action === 'create' ? 201 : 204);
        else expect(status, `${name} ${action}`).toBe(403);
      }
    }
  });

  it('without rules a user may create, and delete what they made: both listed', async () => {
    expect((await actionsOf(pat)).projects).toEqual(['create', 'delete']);
    const own = await t.http('POST', '/projects', { key: pat.key, json: { name: 'pat own' } });
    expect(own.status).toBe(201);
    expect((await t.http('DELETE', `/projects/${own.body._id as string}`, { key: pat.key, headers: ifMatch('"1"') })).status).toBe(204);
  });

  it('a resource whose feature the caller lacks lists no action, and its create is refused', async () => {
    expect((await actionsOf(admin)).tasks).toEqual([]);
    const project = await t.http('POST', '/projects', { key: admin.key, json: { name: 'for a task' } });
    expect((await t.http('POST', '/tasks', { key: admin.key, json: { project_id: project.body._id, title: 'x' } })).status).toBe(403);
  });

  it('a role defined in one tenant gives nothing in another: its name there is an unknown role', async () => {
    const other = await newTenant(t);
    const stranger = await userWith(t, other, ['user']);
    // The other tenant has no role named creator; its user keeps the built-in rule.
    expect((await actionsOf(stranger)).projects).toEqual(['create', 'delete']);
    const res = await t.http('POST', '/admin/users', { json: { email: 'creator-elsewhere@example.com', name: 'C', tenant_id: other, roles: ['creator'] } });
    expect(res.status).toBe(422);
  });
});
