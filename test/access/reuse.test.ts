/**
 * A caller's restriction is built once and reused while the tenant's roles stay the same
 * (docs/access.md, "Per request"): a role change takes effect on the next request, and no actor or
 * tenant is ever answered with another's rows.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.ts';
import type { Actor } from '../../core/context.ts';
import { actorKey, effective, type RoleRules } from '../../plugins/access/engine.ts';
import { normalize } from '../../plugins/access/rules.ts';
import { readFilter } from '../../plugins/resources/access.ts';
import { accessApp, createRole, newTenant, userWith } from './helpers.ts';

type Doc = Record<string, any>;
let t: TestApp;
let a: string;
let b: string;

const asAdmin = (tenant: string) => ({ 'X-Tenant-Id': tenant });
const seedNote = async (tenant: string, body: Doc) => (await t.http('POST', '/notes', { json: body, headers: asAdmin(tenant) })).body as Doc;
const status = async (key: string, id: string) => (await t.http('GET', `/notes/${id}`, { key })).status;

beforeAll(async () => {
  t = await accessApp();
  a = await newTenant(t);
  b = await newTenant(t);
});
afterAll(() => t?.close());

describe('restrictions reused between requests', () => {
  it('a change of the role\'s rules takes effect on the next request, for reads and writes', async () => {
    const role = await createRole(t, { name: 'by_status', permissions: { notes: { read: { rows: { status: 'draft' } }, update: { rows: { status: 'draft' }, fields: ['title'] } } } }, { tenantId: a });
    const u = await userWith(t, a, ['by_status']);
    const draft = await seedNote(a, { title: 'd', status: 'draft' });
    const review = await seedNote(a, { title: 'r', status: 'review' });
    // Twice each: the second answer comes from the reused restriction.
    for (let i = 0; i < 2; i++) {
      expect(await status(u.key, draft._id)).toBe(200);
      expect(await status(u.key, review._id)).toBe(404);
    }
    const patchTitle = (id: string, version: number) => t.http('PATCH', `/notes/${id}`, { key: u.key, json: { title: 'x' }, headers: { 'If-Match': `"${version}"` } });
    expect((await patchTitle(review._id, 1)).status).toBe(404);

    const changed = await t.http('PATCH', `/admin/roles/${role.id}`, {
      json: { permissions: { notes: { read: { rows: { status: 'review' } }, update: { rows: { status: 'review' }, fields: ['title'] } } } },
      headers: asAdmin(a),
    });
    expect(changed.status).toBe(200);
    expect(await status(u.key, draft._id)).toBe(404);
    expect(await status(u.key, review._id)).toBe(200);
    expect((await patchTitle(review._id, 1)).status).toBe(200);
    expect((await patchTitle(draft._id, 1)).status).toBe(404);

    // Read taken away: denied, then given back.
    await t.http('PATCH', `/admin/roles/${role.id}`, { json: { permissions: { notes: { update: { fields: ['title'] } } } }, headers: asAdmin(a) });
    expect(await status(u.key, review._id)).toBe(403);
    expect(await status(u.key, review._id)).toBe(403);
    await t.http('PATCH', `/admin/roles/${role.id}`, { json: { permissions: { notes: { read: true } } }, headers: asAdmin(a) });
    expect(await status(u.key, draft._id)).toBe(200);
  });

  it('two users of one role get their own rows ($actor.id, attributes), one after the other', async () => {
    await createRole(t, { name: 'own_or_level', permissions: { notes: { read: { rows: { $or: [{ owner_id: '$actor.id' }, { level: { $in: '$actor.attributes.levels' } }] } } } } }, { tenantId: a });
    const u1 = await userWith(t, a, ['own_or_level'], { levels: [1] });
    const u2 = await userWith(t, a, ['own_or_level'], { levels: [2] });
    const n1 = await seedNote(a, { title: 'n1', owner_id: u1.userId });
    const n2 = await seedNote(a, { title: 'n2', owner_id: u2.userId });
    const l1 = await seedNote(a, { title: 'l1', level: 1 });
    const l2 = await seedNote(a, { title: 'l2', level: 2 });
    for (let i = 0; i < 2; i++) {
      expect([await status(u1.key, n1._id), await status(u1.key, n2._id), await status(u1.key, l1._id), await status(u1.key, l2._id)]).toEqual([200, 404, 200, 404]);
      expect([await status(u2.key, n1._id), await status(u2.key, n2._id), await status(u2.key, l1._id), await status(u2.key, l2._id)]).toEqual([404, 200, 404, 200]);
    }
  });

  it('the same role name in two tenants: each tenant\'s own rule, never the other\'s', async () => {
    await createRole(t, { name: 'twin', permissions: { notes: { read: { rows: { status: 'draft' } } } } }, { tenantId: a });
    await createRole(t, { name: 'twin', permissions: { notes: { read: { rows: { status: 'review' } } } } }, { tenantId: b });
    const ua = await userWith(t, a, ['twin']);
    const ub = await userWith(t, b, ['twin']);
    const aDraft = await seedNote(a, { title: 'a', status: 'draft' });
    const bDraft = await seedNote(b, { title: 'b', status: 'draft' });
    const bReview = await seedNote(b, { title: 'b2', status: 'review' });
    for (let i = 0; i < 2; i++) {
      expect(await status(ua.key, aDraft._id)).toBe(200);
      expect(await status(ub.key, bDraft._id)).toBe(404);
      expect(await status(ub.key, bReview._id)).toBe(200);
      expect(await status(ua.key, bReview._id)).toBe(404);
    }
  });
});

describe('what may be reused', () => {
  const facts = { name: 'notes', fields: ['title', 'due'], code: undefined, compile: (w: Doc) => w };
  const actor = (over: Partial<Actor> = {}): Actor => ({ id: 'u1', email: 'u@x', name: 'U', tenant_id: 't1', roles: ['r'], scope: null, is_system_user: false, features: [], attributes: {}, ...over });
  const roles = (rows: Doc): Map<string, RoleRules> => new Map([['r', { name: 'r', includes: [], rules: new Map([['notes', { read: normalize({ rows }, (w) => w) }]]) }]]);

  it('grants that use $now or a code rule that is a function are not stable; others are', () => {
    expect(effective(actor(), 'read', facts, roles({ title: '$actor.id' }), false).stable).toBe(true);
    expect(effective(actor(), 'read', facts, roles({ due: { $gt: '$now' } }), false).stable).toBe(false);
    const code = { ...facts, code: { r: { read: (x: Actor) => ({ rows: { title: x.email } }) } } };
    expect(effective(actor(), 'read', code, new Map(), false).stable).toBe(false);
  });

  it('a get-one\'s filter holds the rule\'s rows beside the scope\'s terms, AND-ed only where a name clashes', () => {
    const scope = { _id: 'x', tenant_id: 't', is_deleted: false };
    expect(readFilter(scope, { status: 'draft', $or: [{ level: 1 }] })).toEqual({ ...scope, status: 'draft', $or: [{ level: 1 }] });
    expect(readFilter({ ...scope, $or: [{ a: 1 }] }, { $or: [{ b: 1 }] })).toEqual({ ...scope, $or: [{ a: 1 }], $and: [{ $or: [{ b: 1 }] }] });
    expect(readFilter(scope, { is_deleted: true })).toEqual({ ...scope, $and: [{ is_deleted: true }] });
    expect(readFilter(scope, null)).toBe(scope);
  });

  it('actors that differ in anything a rule reads have different keys', () => {
    const base = actorKey(actor({ attributes: { a: 1 } }), false);
    expect(actorKey(actor({ attributes: { a: 1 }, email: 'other@x' }), false)).toBe(base);
    for (const other of [
      actor({ id: 'u2', attributes: { a: 1 } }), actor({ tenant_id: 't2', attributes: { a: 1 } }), actor({ roles: ['r', 's'], attributes: { a: 1 } }),
      actor({ attributes: { a: '1' } }), actor({ attributes: { a: [1] } }), actor({ attributes: { a: Number.NaN } }),
    ]) expect(actorKey(other, false)).not.toBe(base);
    expect(actorKey(actor({ attributes: { a: 1 } }), true)).not.toBe(base);
    expect(actorKey(actor({ attributes: { a: Number.NaN } }), false)).not.toBe(actorKey(actor({ attributes: { a: null } }), false));
  });
});
