/**
 * Administrative changes of documents without a version are events on the log, each written by the
 * change's own write (docs/events.md): job schedules and chains (`job_schedule.*`, `job_chain.*`)
 * and webhook endpoints (`webhook_endpoint.*`, never a secret, never sent to endpoints). A delete
 * leaves a tombstone carrying its event: reads never show it, its unique name is free at once, and
 * the relay (or, after a crash, the sweep) removes it once the event is in the log. Each event is
 * read in its tenant only.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { FAST } from '../jobs/helpers.ts';
import { jobsFixturePlugin } from '../fixtures/jobs-fixture-plugin.ts';
import { jobsPlugin } from '../../plugins/jobs/index.ts';
import { webhooksPlugin } from '../../plugins/webhooks/index.ts';
import { OUTBOUND_CONFIG } from '../webhooks/outbound-helpers.ts';
import { catalogue, eventsOfType, expectConforms, visibleTo } from './domain-helpers.ts';

let t: TestApp;
let A: Awaited<ReturnType<typeof createTenantUser>>;
let B: Awaited<ReturnType<typeof createTenantUser>>;
const ofDoc = (id: string) => (e: Record<string, any>) => e.data.id === id;
const col = (name: string) => t.app.db.conn.collection(name);

beforeAll(async () => {
  t = await buildTestApp({ plugins: [jobsPlugin, jobsFixturePlugin, webhooksPlugin], config: { ...FAST, ...OUTBOUND_CONFIG } });
  A = await createTenantUser(t, { roles: ['admin'] });
  B = await createTenantUser(t, { roles: ['admin'] });
});
afterAll(() => t?.close());

describe('job schedules', () => {
  it('create, update and delete store one event each, in the schedule\'s tenant, with the schedule as the API shows it', async () => {
    const types = await catalogue(t, A.key, ['job_schedule.created', 'job_schedule.updated', 'job_schedule.deleted'], 'jobs');
    const c = await t.http('POST', '/jobs/schedules', { key: A.key, json: { name: 'ev-sched', target: 'tenant_job', cron: '0 0 * * *' } });
    expect(c.status).toBe(201);
    expect((await t.http('PATCH', `/jobs/schedules/${c.body.id}`, { key: A.key, json: { cron: '0 6 * * *' } })).status).toBe(200);
    expect((await t.http('DELETE', `/jobs/schedules/${c.body.id}`, { key: A.key })).status).toBe(204);

    const [created] = await eventsOfType(t, A.key, 'job_schedule.created', ofDoc(c.body.id));
    const [updated] = await eventsOfType(t, A.key, 'job_schedule.updated', ofDoc(c.body.id));
    const [deleted] = await eventsOfType(t, A.key, 'job_schedule.deleted', ofDoc(c.body.id));
    expect(created).toMatchObject({ tenant_id: A.tenantId, actor: A.userId, data: { job_name: 'ev-sched', cron_expression: '0 0 * * *' } });
    expect(updated!.data).toMatchObject({ cron_expression: '0 6 * * *' });
    expect(deleted!.data).toMatchObject({ job_name: 'ev-sched', cron_expression: '0 6 * * *' });
    expectConforms(types['job_schedule.created']!, created!.data);
    // Tenant isolation of the events.
    expect(await visibleTo(t, B.key, 'job_schedule.created', ofDoc(c.body.id))).toEqual([]);
    expect(await visibleTo(t, B.key, 'job_schedule.deleted', ofDoc(c.body.id))).toEqual([]);
    // The relay removed the tombstone once the delete's event was in the log.
    expect(await col('job_schedules').countDocuments({ _id: new Types.ObjectId(c.body.id) })).toBe(0);
  });

  it('a schedule deleted by a process that died before the relay: a tombstone nobody reads, its name free, removed by the sweep with its event stored', async () => {
    const events = t.app.services.get('events');
    const c = await t.http('POST', '/jobs/schedules', { key: A.key, json: { name: 'ev-lost', target: 'tenant_job', cron: '0 0 * * *' } });
    expect(c.status).toBe(201);
    const committed = events.committed.bind(events);
    events.committed = async () => undefined;
    try {
      expect((await t.http('DELETE', `/jobs/schedules/${c.body.id}`, { key: A.key })).status).toBe(204);
    } finally {
      events.committed = committed;
    }
    const id = new Types.ObjectId(c.body.id);
    const tomb = await col('job_schedules').findOne({ _id: id });
    expect(tomb).toMatchObject({ _removed: true, is_enabled: false });
    expect(tomb!._outbox.map((e: { type: string }) => e.type)).toContain('job_schedule.deleted');
    expect((await t.http('GET', `/jobs/schedules/${c.body.id}`, { key: A.key })).status).toBe(404);
    expect((await t.http('GET', '/jobs/schedules', { key: A.key })).body.map((s: { id: string }) => s.id)).not.toContain(c.body.id);
    expect((await t.http('PATCH', `/jobs/schedules/${c.body.id}`, { key: A.key, json: { cron: '0 1 * * *' } })).status).toBe(404);
    // The name is free at once.
    const again = await t.http('POST', '/jobs/schedules', { key: A.key, json: { name: 'ev-lost', target: 'tenant_job', cron: '0 0 * * *' } });
    expect(again.status).toBe(201);

    // Left behind a minute ago: a catch-up sweep stores the delete's event and removes the tombstone.
    await col('job_schedules').updateOne({ _id: id }, { $set: { '_outbox.$[].created_at': new Date(Date.now() - 60_000) } });
    await events.sweep(new Date(Date.now() - 120_000));
    expect(await col('job_schedules').countDocuments({ _id: id })).toBe(0);
    const [deleted] = await eventsOfType(t, A.key, 'job_schedule.deleted', ofDoc(c.body.id));
    expect(deleted!.data).toMatchObject({ job_name: 'ev-lost' });
    expect(await col('events').countDocuments({ type: 'job_schedule.deleted', 'source.id': id })).toBe(1);
  });
});

describe('job chains', () => {
  it('create, update and delete store one event each, of no tenant (system administrators)', async () => {
    const c = await t.http('POST', '/jobs/chains', { json: { name: 'ev-chain', steps: [{ job: 'count' }] } });
    expect(c.status).toBe(201);
    expect((await t.http('PATCH', `/jobs/chains/${c.body.id}`, { json: { description: 'described' } })).status).toBe(200);
    expect((await t.http('DELETE', `/jobs/chains/${c.body.id}`)).status).toBe(204);
    const admin = (await t.http('GET', '/events?limit=100')).body.items.filter(ofDoc(c.body.id));
    expect(admin.map((e: { type: string }) => e.type).sort()).toEqual(['job_chain.created', 'job_chain.deleted', 'job_chain.updated']);
    expect(admin.every((e: { tenant_id: string | null }) => e.tenant_id === null)).toBe(true);
    expect(await visibleTo(t, A.key, 'job_chain.created', ofDoc(c.body.id))).toEqual([]);
    // The name is free for a new chain, the tombstone gone.
    expect((await t.http('POST', '/jobs/chains', { json: { name: 'ev-chain', steps: [{ job: 'count' }] } })).status).toBe(201);
    expect(await col('job_chains').countDocuments({ _id: new Types.ObjectId(c.body.id) })).toBe(0);
  });
});

describe('webhook endpoints', () => {
  it('create, update, rotation and delete store one event each, never a secret, never sent to endpoints', async () => {
    const types = await catalogue(t, A.key, ['webhook_endpoint.created', 'webhook_endpoint.updated', 'webhook_endpoint.deleted'], 'webhooks');
    expect(Object.values(types).map((x) => x.outbound)).toEqual([false, false, false]);
    const c = await t.http('POST', '/webhook-endpoints', { key: A.key, json: { url: 'http://127.0.0.1:9/ev', event_types: ['ping'], enabled: false } });
    expect(c.status).toBe(201);
    const rotated = await t.http('POST', `/webhook-endpoints/${c.body.id}/rotate-secret`, { key: A.key });
    expect(rotated.status).toBe(200);
    expect((await t.http('PATCH', `/webhook-endpoints/${c.body.id}`, { key: A.key, json: { description: 'changed' } })).status).toBe(200);
    expect((await t.http('DELETE', `/webhook-endpoints/${c.body.id}`, { key: A.key })).status).toBe(204);

    const [created] = await eventsOfType(t, A.key, 'webhook_endpoint.created', ofDoc(c.body.id));
    const updates = await eventsOfType(t, A.key, 'webhook_endpoint.updated', ofDoc(c.body.id), 2);
    const [deleted] = await eventsOfType(t, A.key, 'webhook_endpoint.deleted', ofDoc(c.body.id));
    expect(created).toMatchObject({ tenant_id: A.tenantId, actor: A.userId, data: { url: 'http://127.0.0.1:9/ev', enabled: false } });
    expect(updates.map((e) => e.data.description).sort()).toEqual(['changed', null]);
    expect(deleted!.data).toMatchObject({ description: 'changed' });
    expectConforms(types['webhook_endpoint.created']!, created!.data);
    const raw = await col('events').find({ 'source.id': new Types.ObjectId(c.body.id) }).toArray();
    expect(raw).toHaveLength(4);
    const text = JSON.stringify(raw);
    expect(text).not.toContain('whsec_');
    expect(text).not.toContain(c.body.secret.slice(6, 30));
    expect(text).not.toContain(rotated.body.secret.slice(6, 30));
    expect(await visibleTo(t, B.key, 'webhook_endpoint.created', ofDoc(c.body.id))).toEqual([]);
    expect(await col('webhook_endpoints').countDocuments({ _id: new Types.ObjectId(c.body.id) })).toBe(0);
    // Not an endpoint's subscription either.
    const sub = await t.http('POST', '/webhook-endpoints', { key: A.key, json: { url: 'http://127.0.0.1:9/x', event_types: ['webhook_endpoint.created'] } });
    expect(sub.status).toBe(422);
  });
});
