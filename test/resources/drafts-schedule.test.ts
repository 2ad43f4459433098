/**
 * Scheduled publishing (`publish_at`): the `publish_drafts` job publishes the drafts whose time has
 * come, each exactly once while two app instances on one database race to publish them: one
 * `<resource>.published` event and one version per draft. Drafts not due stay drafts; a due draft
 * whose unique value another document took stays a draft.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Schema } from 'mongoose';
import { buildTestApp, createTenantUser, jobContext, uniqueDbUri, type TestApp } from '../helpers/app.ts';
import { defineResource, resourcesPlugin } from '../../plugins/resources/index.ts';
import { projectsResource } from '../../plugins/resources/sample-resources.ts';
import { systemActor } from '../../core/context.ts';
import { col, ifMatch, oid } from './write-helpers.ts';

const slugs = defineResource({ name: 'slugs', schema: new Schema({ slug: { type: String, required: true, unique: true } }), versions: true, drafts: true });
const plugins = () => [resourcesPlugin.configure({ resources: [projectsResource, slugs] })];

type User = { key: string; tenantId: string; userId: string };
let a: TestApp;
let b: TestApp;
let author: User;
let reader: User;

beforeAll(async () => {
  const uri = uniqueDbUri();
  a = await buildTestApp({ plugins: plugins(), config: { MONGODB_URI: uri } });
  b = await buildTestApp({ plugins: plugins(), config: { MONGODB_URI: uri } });
  author = await createTenantUser(a);
  reader = await createTenantUser(a, { tenantId: author.tenantId });
});
afterAll(async () => {
  await b?.close();
  await a?.close();
});

async function ok(method: string, path: string, key: string, json?: unknown, etag?: string) {
  const res = await a.http(method, path, { key, ...(json !== undefined ? { json } : {}), ...(etag ? { headers: ifMatch(etag) } : {}) });
  expect(res.status, `${method} ${path}: ${JSON.stringify(res.body)}`).toBeLessThan(300);
  return res;
}

describe('publish_at', () => {
  it('two instances racing publish each due draft once: one published event and one version each', async () => {
    const past = new Date(Date.now() - 60_000).toISOString();
    const future = new Date(Date.now() + 86_400_000).toISOString();
    const due: string[] = [];
    for (let i = 0; i < 10; i++) {
      due.push((await ok('POST', `/projects?draft=true&publish_at=${past}`, author.key, { name: `scheduled new ${i}` })).body._id as string);
      const pub = (await ok('POST', '/projects', author.key, { name: `scheduled old ${i}` })).body._id as string;
      await ok('PATCH', `/projects/${pub}?draft=true&publish_at=${past}`, author.key, { name: `scheduled edit ${i}` }, '"1"');
      due.push(pub);
    }
    const later = (await ok('POST', `/projects?draft=true&publish_at=${future}`, author.key, { name: 'scheduled later' })).body._id as string;

    const runs = await Promise.all([a, b, a, b].map((app) => app.app.services.get('resources').publishDue(systemActor())));
    expect(runs.reduce((n, r) => n + r.published, 0)).toBe(20);
    await Promise.all([a, b].map((app) => app.app.services.get('events').flush()));

    for (const id of due) {
      expect(await col(a, 'events').countDocuments({ type: 'projects.published', 'source.id': oid(id) })).toBe(1);
      expect(await col(a, 'resource_versions').countDocuments({ doc_id: oid(id), operation: 'published' })).toBe(1);
    }
    const seen = ((await ok('GET', '/projects?q=scheduled&per_page=100', reader.key)).body.items as { name: string; _status: string }[]).map((p) => p.name);
    expect(seen.filter((n) => n.startsWith('scheduled new'))).toHaveLength(10);
    expect(seen.filter((n) => n.startsWith('scheduled edit'))).toHaveLength(10);
    expect(seen.filter((n) => n.startsWith('scheduled old'))).toHaveLength(0);
    expect(seen).not.toContain('scheduled later');
    expect(await col(a, 'projects').findOne({ _id: oid(later) })).toMatchObject({ _published: false });

    // Later runs find nothing more due.
    const again = await a.app.services.get('resources').publishDue(systemActor());
    expect(again.published).toBe(0);
  });

  it('the publish_drafts job runs the same publish; a draft whose unique value is taken stays a draft', async () => {
    const past = new Date(Date.now() - 1000).toISOString();
    const first = (await ok('POST', '/slugs', author.key, { slug: 'one' })).body._id as string;
    await ok('PATCH', `/slugs/${first}?draft=true&publish_at=${past}`, author.key, { slug: 'two' }, '"1"');
    await ok('POST', '/slugs', author.key, { slug: 'two' });
    const job = a.app.kernel.jobs().find((j) => j.name === 'publish_drafts')!;
    const out = await job.run(jobContext({ actor: systemActor() }), {});
    expect(out).toEqual({ published: 0, conflicts: 1 });
    expect(await col(a, 'slugs').findOne({ _id: oid(first) })).toMatchObject({ slug: 'one', _draft: { values: { slug: 'two' } } });
    const res = await a.http('POST', `/slugs/${first}/publish`, { key: author.key, headers: ifMatch('"2"') });
    expect(res.status).toBe(409);
    expect(res.body.error).toMatchObject({ code: 'CONFLICT', details: { field: 'slug' } });
  });
});
