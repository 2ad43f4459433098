/**
 * Shared subscription results (plugins/events/realtime/yoga.ts): subscriptions with the same document,
 * variables and visibility key execute each event once per group, over both transports; groups of
 * other tenants, roles or attributes never share, and get their own payloads; a member whose
 * credential ends leaves its group without ending the others.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { resourceEventsPlugin } from '../fixtures/resource-events-plugin.ts';
import { EVENT_FIELDS, EVENTS_SUBSCRIPTION, sleep, sseSubscribe, until, wsTracker } from './helpers.ts';
import { addMembership } from '../helpers/memberships.ts';

let t: TestApp;
const ws = wsTracker(() => t.url);
const { client, sub } = ws;
const closers: (() => void)[] = [];
const EVENTS = EVENTS_SUBSCRIPTION;
const CHANGED = `subscription($resource: String!) { resourceChanged(resource: $resource) { ${EVENT_FIELDS} } }`;
const stats = () => t.app.services.get('realtime').stats();

beforeAll(async () => {
  t = await buildTestApp({
    plugins: [resourcesPlugin, resourceEventsPlugin],
    config: { SAMPLE_RESOURCES_ENABLED: 'false', EVENTS_POLL_INTERVAL_MS: '50', AUTH_CACHE_TTL_MS: '200' },
  });
});
afterAll(async () => {
  for (const c of closers) c();
  await ws.disposeAll();
  await t?.close();
});

describe('shared subscription results', () => {
  it('N subscribers with one document, variables and visibility: one execution per event per group, over graphql-ws and GraphQL over SSE; other tenants and roles are other groups with their own payloads', async () => {
    const a1 = await createTenantUser(t, { features: ['memos'] });
    // Another user (and key) of the same tenant, roles and features: the same visibility, the same group.
    const a2 = await createTenantUser(t, { tenantId: a1.tenantId, features: ['memos'] });
    const adminA = await createTenantUser(t, { tenantId: a1.tenantId, roles: ['admin'], features: ['memos'] });
    // The other tenant's user is a second membership of the first one's person: one person, two tenants.
    const b = await addMembership(t, a1.userId, { features: ['memos'] });
    const vars = { types: ['memos.created'] };
    const groupA = [
      ...Array.from({ length: 6 }, () => sub(client({ apiKey: a1.key }), EVENTS, vars)),
      // Several subscriptions on one connection as well.
      ...(() => {
        const c = client({ apiKey: a2.key });
        return [sub(c, EVENTS, vars), sub(c, EVENTS, vars)];
      })(),
    ];
    const sseA = await Promise.all([1, 2].map(() => sseSubscribe(t.url, EVENTS, vars, { 'X-API-Key': a1.key })));
    closers.push(...sseA.map((s) => () => s.close()));
    const admins = [1, 2].map(() => sub(client({ apiKey: adminA.key }), EVENTS, vars));
    const groupB = [1, 2, 3].map(() => sub(client({ apiKey: b.key }), EVENTS, vars));
    // The same visibility, another document: another group.
    const narrow = sub(client({ apiKey: a1.key }), `subscription($types: [String!]) { events(types: $types) { id data } }`, vars);
    await until(() => stats().listeners >= 16, 10_000, 'every subscriber listening');
    await sleep(200);
    expect(stats().groups).toBe(4);
    const before = stats();

    for (const [key, title] of [[a1.key, 'a-1'], [b.key, 'b-1'], [a2.key, 'a-2'], [a1.key, 'a-3']] as const) {
      expect((await t.http('POST', '/memos', { key, json: { title } })).status).toBe(201);
    }
    const allA = () => [...groupA, ...admins, narrow].every((s) => s.results.length === 3) && sseA.every((s) => s.results().length === 3);
    await until(() => allA() && groupB.every((s) => s.results.length === 1), 15_000, 'deliveries');
    await sleep(300);
    const after = stats();

    // 3 events of tenant A to its 3 groups (users, administrators, the other document), 1 of B to its group.
    expect(after.executions - before.executions).toBe(3 * 3 + 1);
    // Every other delivery reused its group's result: 10 + 2 + 1 subscribers of A, 3 of B.
    expect(after.reused - before.reused).toBe(3 * (10 + 2 + 1 - 3) + (3 - 1));
    for (const s of [...groupA, ...admins]) expect(s.values('events').map((e) => e.data.title)).toEqual(['a-1', 'a-2', 'a-3']);
    for (const s of sseA) expect(s.results().map((r) => r.data.events.data.title)).toEqual(['a-1', 'a-2', 'a-3']);
    expect(narrow.values('events')[0]).toEqual({ id: expect.any(String), data: expect.objectContaining({ title: 'a-1' }) });
    for (const s of groupB) expect(s.values('events')).toEqual([expect.objectContaining({ tenant_id: b.tenantId, data: expect.objectContaining({ title: 'b-1' }) })]);
    for (const s of [...groupA, ...groupB]) expect(s.values('events').every((e) => !('secret' in e.data))).toBe(true);
  });

  it('an attribute rule that restricts by field: one group per attribute value, each with only its own documents', async () => {
    const eu = await createTenantUser(t, { attributes: { region: 'eu' } });
    const eu2 = await createTenantUser(t, { tenantId: eu.tenantId, attributes: { region: 'eu' } });
    const us = await createTenantUser(t, { tenantId: eu.tenantId, attributes: { region: 'us' } });
    const vars = { resource: 'sites' };
    const euSubs = [eu, eu, eu2].map((u) => sub(client({ apiKey: u.key }), CHANGED, vars));
    const usSubs = [us, us].map((u) => sub(client({ apiKey: u.key }), CHANGED, vars));
    await sleep(500);
    const before = stats();
    expect((await t.http('POST', '/sites', { key: eu.key, json: { name: 'Paris', region: 'eu' } })).status).toBe(201);
    expect((await t.http('POST', '/sites', { key: us.key, json: { name: 'Boston', region: 'us' } })).status).toBe(201);
    await until(() => euSubs.every((s) => s.results.length === 1) && usSubs.every((s) => s.results.length === 1), 15_000, 'deliveries');
    await sleep(300);
    for (const s of euSubs) expect(s.values('resourceChanged').map((e) => e.data.name)).toEqual(['Paris']);
    for (const s of usSubs) expect(s.values('resourceChanged').map((e) => e.data.name)).toEqual(['Boston']);
    expect(stats().executions - before.executions).toBe(2);
    expect(stats().reused - before.reused).toBe(2 + 1);
  });

  it('a member whose key is revoked ends alone (AUTH_REQUIRED); the rest of its group keeps receiving; an empty group is dropped', async () => {
    const u1 = await createTenantUser(t, { features: ['memos'] });
    const u2 = await createTenantUser(t, { tenantId: u1.tenantId, features: ['memos'] });
    const vars = { types: ['memos.updated', 'memos.created'] };
    const stays = [1, 2].map(() => sub(client({ apiKey: u1.key }), EVENTS, vars));
    const revoked = sub(client({ apiKey: u2.key }), EVENTS, vars);
    await sleep(500);
    const groups = stats().groups;
    expect((await t.http('DELETE', `/admin/api-keys/${u2.keyId}`)).status).toBe(200);
    await until(() => revoked.done, 10_000, 'the revoked stream ending');
    expect(revoked.errors[0].extensions.code).toBe('AUTH_REQUIRED');
    expect((await t.http('POST', '/memos', { key: u1.key, json: { title: 'after' } })).status).toBe(201);
    await until(() => stays.every((s) => s.results.length === 1), 15_000, 'deliveries to the rest');
    expect(stays[0]!.values('events')[0].data.title).toBe('after');
    for (const s of stays) s.dispose();
    await until(() => stats().groups === groups - 1, 5000, 'the group dropped');
  });
});
