/**
 * Draft values never travel on the event surfaces: the event log's read API (`/events`), the SSE
 * stream and outbound webhooks carry `<resource>.draft_saved` and `.unpublished` without them (the
 * object is the published document, or only `_id` and the base fields), while `.published`
 * carries the published document. A restore of a version is an ordinary `.updated` whose version
 * records what it restored.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { projectsResource } from '../../plugins/resources/sample-resources.ts';
import { webhooksPlugin } from '../../plugins/webhooks/index.ts';
import { OUTBOUND_CONFIG, startReceiver, until, type Receiver } from '../webhooks/outbound-helpers.ts';
import { eventStream, type SseStream } from '../realtime/helpers.ts';
import { ifMatch } from './write-helpers.ts';

type User = { key: string; tenantId: string; userId: string };
let t: TestApp;
let author: User;
let reader: User;
let admin: User;
let receiver: Receiver;
const streams: SseStream[] = [];
const SECRET = 'SECRETDRAFTVALUE';
const TYPES = ['created', 'updated', 'draft_saved', 'published', 'unpublished'].map((v) => `projects.${v}`);

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [projectsResource] }), webhooksPlugin], config: OUTBOUND_CONFIG });
  author = await createTenantUser(t);
  reader = await createTenantUser(t, { tenantId: author.tenantId });
  admin = await createTenantUser(t, { tenantId: author.tenantId, roles: ['admin'] });
  receiver = await startReceiver();
});
afterEach(() => streams.splice(0).forEach((s) => s.close()));
afterAll(async () => {
  await receiver?.close();
  await t?.close();
});

async function ok(method: string, path: string, key: string, json?: unknown, etag?: string) {
  const res = await t.http(method, path, { key, ...(json !== undefined ? { json } : {}), ...(etag ? { headers: ifMatch(etag) } : {}) });
  expect(res.status, `${method} ${path}: ${JSON.stringify(res.body)}`).toBeLessThan(300);
  return res;
}

describe('draft values on the event surfaces', () => {
  it('/events, the SSE stream and webhooks carry the draft events without the draft values; published events carry the document', async () => {
    const hook = await t.http('POST', '/webhook-endpoints', { key: admin.key, json: { url: receiver.url, event_types: TYPES } });
    expect(hook.status, JSON.stringify(hook.body)).toBe(201);
    const stream = await eventStream(t.url, { key: reader.key, query: `types=${TYPES.join(',')}` });
    streams.push(stream);
    expect(stream.status).toBe(200);

    // A document never published, a draft of a published one, and a published one withdrawn with a draft pending.
    await ok('POST', '/projects?draft=true', author.key, { name: `${SECRET} new`, description: SECRET });
    const pub = (await ok('POST', '/projects', author.key, { name: 'visible' })).body._id as string;
    await ok('PATCH', `/projects/${pub}?draft=true`, author.key, { name: `${SECRET} edit` }, '"1"');
    const gone = (await ok('POST', '/projects', author.key, { name: 'withdrawn' })).body._id as string;
    await ok('PATCH', `/projects/${gone}?draft=true`, author.key, { description: `${SECRET} pending` }, '"1"');
    await ok('POST', `/projects/${gone}/unpublish`, author.key, undefined, '"2"');
    // Last: a draft published, whose values are then public.
    const last = (await ok('POST', '/projects?draft=true', author.key, { name: 'draft then public' })).body._id as string;
    await ok('POST', `/projects/${last}/publish`, author.key, undefined, '"1"');

    const published = (body: string) => body.includes('projects.published') && body.includes('draft then public');
    await until(() => stream.events.some((e) => e.event === 'projects.published' && e.data.includes('draft then public')), 15_000);
    await until(() => receiver.requests.some((r) => published(r.body)), 15_000);

    // The log's read API is for administrators; even they read no draft values there.
    {
      const log = await ok('GET', `/events?limit=100&types=${TYPES.join(',')}`, admin.key);
      const items = log.body.items as { type: string; data: Record<string, unknown> }[];
      expect(items.filter((e) => e.type === 'projects.draft_saved')).toHaveLength(4);
      expect(items.filter((e) => e.type === 'projects.unpublished')).toHaveLength(1);
      expect(items.find((e) => e.type === 'projects.published')?.data).toMatchObject({ name: 'draft then public' });
      // The never-published document's event has only `_id` and the base fields.
      const firstDraft = items.filter((e) => e.type === 'projects.draft_saved').find((e) => !('name' in e.data));
      expect(firstDraft).toBeDefined();
      expect(JSON.stringify(items)).not.toContain(SECRET);
    }
    expect(stream.events.filter((e) => e.event === 'projects.draft_saved')).toHaveLength(4);
    expect(stream.events.map((e) => e.data).join('\n')).not.toContain(SECRET);
    await until(() => receiver.requests.filter((r) => r.body.includes('projects.draft_saved')).length === 4, 15_000);
    expect(receiver.requests.map((r) => r.body).join('\n')).not.toContain(SECRET);
  });
});

describe('versions of a drafts resource', () => {
  it('a restore is an ordinary updated event whose version records what it restored; draft saves are marked versions', async () => {
    const id = (await ok('POST', '/projects', author.key, { name: 'v1' })).body._id as string;
    await ok('PATCH', `/projects/${id}`, author.key, { name: 'v2' }, '"1"');
    await ok('PATCH', `/projects/${id}?draft=true`, author.key, { name: `${SECRET} v3` }, '"2"');
    await ok('POST', `/projects/${id}/versions/1/restore`, author.key, undefined, '"3"');
    const history = (await ok('GET', `/projects/${id}/versions`, reader.key)).body.items as { version: number; operation: string; restored_from: number | null }[];
    expect(history.map((v) => [v.version, v.operation, v.restored_from])).toEqual([[4, 'updated', 1], [3, 'draft_saved', null], [2, 'updated', null], [1, 'created', null]]);
    const draftVersion = await ok('GET', `/projects/${id}/versions/3`, reader.key);
    expect(JSON.stringify(draftVersion.body)).not.toContain(SECRET);
    expect((await ok('GET', `/projects/${id}`, reader.key)).body).toMatchObject({ name: 'v1', _status: 'published' });
    const log = await ok('GET', `/events?limit=100&types=projects.updated`, admin.key);
    expect((log.body.items as { data: { _id: string; version: number } }[]).filter((e) => e.data._id === id).map((e) => e.data.version)).toEqual(expect.arrayContaining([2, 4]));
  });
});
