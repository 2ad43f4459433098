/**
 * Creates and updates of a resource whose schema allows it skip mongoose documents and queries
 * (plugins/resources/plain-write.ts). What they store and what they refuse must be exactly what
 * mongoose stores and refuses: each case runs against twin resources with the same fields, one of
 * them with middleware of its own (which keeps it on mongoose's path), and compares the stored
 * documents key by key, in order, and the answers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Schema } from 'mongoose';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { defineResource, resourcesPlugin } from '../../plugins/resources/index.ts';
import { sampleResources } from '../../plugins/resources/sample-resources.ts';
import { PlainWriter } from '../../plugins/resources/plain-write.ts';
import { raw } from './write-helpers.ts';

const fields = () => ({
  label: { type: String, required: true, trim: true, minlength: 2, maxlength: 20 },
  code: { type: String, uppercase: true, match: /^[A-Z]{3}$/, default: null },
  email: { type: String, lowercase: true, trim: true, default: null },
  kind: { type: String, enum: ['a', 'b'], default: 'a' },
  size: { type: Number, min: 1, max: 10, default: null },
  on: { type: Boolean, default: false },
  at: { type: Date, default: null },
  parts: { type: [String], default: [] },
  marks: { type: [Number] },
  extra: { type: Schema.Types.Mixed, default: null },
  project_id: { type: Schema.Types.ObjectId, ref: 'projects', default: null },
  note: { type: String },
});

let saves = 0;
let queries = 0;
const hooked = new Schema(fields());
hooked.pre('save', () => {
  saves++;
});
hooked.pre('findOneAndUpdate', () => {
  queries++;
});

const plainRes = defineResource({ name: 'plain_gadgets', schema: new Schema(fields()) });
const mongooseRes = defineResource({ name: 'hooked_gadgets', schema: hooked });

let t: TestApp;
let user: { key: string };
let projectId: string;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [...sampleResources, plainRes, mongooseRes] })] });
  user = await createTenantUser(t);
  projectId = (await t.http('POST', '/projects', { key: user.key, json: { name: 'Parent' } })).body._id;
});
afterAll(() => t?.close());

/** The stored document without what differs by nature between two writes (ids, times, event ids). */
async function stored(resource: string, id: string) {
  const doc = (await raw(t, resource, id))!;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(doc)) if (!['_id', 'created_at', 'updated_at', '_outbox'].includes(k)) out[k] = v;
  return { keys: Object.keys(doc), doc: out };
}

const BODIES: Record<string, unknown>[] = [
  { label: 'Plain' },
  { label: '  padded  ', email: '  Someone@Example.COM ', code: 'abc', kind: 'b', size: 3, on: true, at: '2026-01-02T03:04:05Z', parts: ['x', 'y'], marks: [1, 2.5], extra: { a: [1, { b: null }] }, note: 'n' },
  { note: 'first', label: 'Order', size: null, extra: null, parts: [] },
];

it('the twin without middleware takes the plain path, the other mongoose\'s', () => {
  const writer = (name: string) => new PlainWriter(t.app.services.get('resources').get(name)!.model);
  expect([writer('plain_gadgets').inserts, writer('plain_gadgets').updates]).toEqual([true, true]);
  expect([writer('hooked_gadgets').inserts, writer('hooked_gadgets').updates]).toEqual([false, false]);
  expect([writer('projects').inserts, writer('tasks').updates]).toEqual([true, true]);
});

describe('creates store what mongoose stores', () => {
  for (const [i, body] of BODIES.entries()) {
    it(`body ${i + 1}: same document, same key order`, async () => {
      const json = { ...body, ...(i === 1 ? { project_id: projectId } : {}) };
      const before = saves;
      const a = await t.http('POST', '/plain_gadgets', { key: user.key, json });
      const b = await t.http('POST', '/hooked_gadgets', { key: user.key, json });
      expect(a.status).toBe(201);
      expect(b.status).toBe(201);
      expect(saves).toBe(before + 1);
      const [x, y] = [await stored('plain_gadgets', a.body._id), await stored('hooked_gadgets', b.body._id)];
      expect(x.doc).toEqual(y.doc);
      expect(x.keys).toEqual(y.keys);
      const strip = (d: Record<string, unknown>) => ({ ...d, _id: null, created_at: null, updated_at: null });
      expect(strip(a.body)).toEqual(strip(b.body));
      expect(Object.keys(a.body)).toEqual(Object.keys(b.body));
    });
  }

  it('refuses what mongoose refuses, with the same answer', async () => {
    for (const json of [{ label: 'x' }, { label: '   ' }, { label: '' }, { label: 'ok', code: 'abcd' }, { label: 'y'.repeat(21) }]) {
      const a = await t.http('POST', '/plain_gadgets', { key: user.key, json });
      const b = await t.http('POST', '/hooked_gadgets', { key: user.key, json });
      expect(a.status, JSON.stringify(json)).toBe(422);
      expect(a.status).toBe(b.status);
      expect((a.body as { error: unknown }).error).toEqual((b.body as { error: unknown }).error);
    }
  });
});

describe('updates store what mongoose stores', () => {
  const PATCHES: Record<string, unknown>[] = [{ label: ' New label ' }, { email: 'X@Y.Z', size: 10, parts: ['p'], at: '2026-05-06' }, { note: null, extra: { z: 1 } }];
  it('PATCH and PUT: same documents after each', async () => {
    const a = await t.http('POST', '/plain_gadgets', { key: user.key, json: BODIES[1] });
    const b = await t.http('POST', '/hooked_gadgets', { key: user.key, json: BODIES[1] });
    let version = 1;
    const before = queries;
    const steps: [string, Record<string, unknown>][] = [...PATCHES.map((p) => ['PATCH', p] as [string, Record<string, unknown>]), ['PUT', { label: 'Replaced', marks: [3] }]];
    for (const [method, json] of steps) {
      const ra = await t.http(method, `/plain_gadgets/${a.body._id}`, { key: user.key, json, headers: { 'If-Match': `"${version}"` } });
      const rb = await t.http(method, `/hooked_gadgets/${b.body._id}`, { key: user.key, json, headers: { 'If-Match': `"${version}"` } });
      expect(ra.status, `${method} ${JSON.stringify(json)}`).toBe(200);
      expect(rb.status).toBe(200);
      version++;
      const [x, y] = [await stored('plain_gadgets', a.body._id), await stored('hooked_gadgets', b.body._id)];
      expect(x.doc).toEqual(y.doc);
      expect(x.keys).toEqual(y.keys);
    }
    expect(queries).toBe(before + steps.length);
  });

  it('refuses what mongoose refuses, with the same answer, and changes nothing', async () => {
    const a = await t.http('POST', '/plain_gadgets', { key: user.key, json: { label: 'Keep' } });
    const b = await t.http('POST', '/hooked_gadgets', { key: user.key, json: { label: 'Keep' } });
    for (const json of [{ label: 'x' }, { label: null }, { label: '  ' }, { code: 'toolong' }]) {
      const ra = await t.http('PATCH', `/plain_gadgets/${a.body._id}`, { key: user.key, json, headers: { 'If-Match': '"1"' } });
      const rb = await t.http('PATCH', `/hooked_gadgets/${b.body._id}`, { key: user.key, json, headers: { 'If-Match': '"1"' } });
      expect(ra.status, JSON.stringify(json)).toBe(rb.status);
      expect(ra.status).toBeGreaterThanOrEqual(400);
      expect((ra.body as { error: unknown }).error).toEqual((rb.body as { error: unknown }).error);
    }
    expect((await raw(t, 'plain_gadgets', a.body._id))!.version).toBe(1);
  });
});
