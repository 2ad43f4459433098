/**
 * SIGKILL of one of two replicas while it runs a job, handles an inbound webhook and has audit
 * entries to flush. The other replica finishes the job once, after the job lock's ttl; the webhook
 * is processed once, by the provider's redelivery after the processing lease; no acknowledged
 * write is missing.
 */
import mongoose, { type Connection } from 'mongoose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, uniqueDbUri } from '../helpers/app.ts';
import { startReplicas, type ServerProcess } from '../helpers/processes.ts';
import { waitFor } from '../helpers/wait.ts';
import { SLOWHOOK_SECRET } from '../fixtures/faults-plugin.ts';
import { hmac } from '../webhooks/helpers.ts';
import { unrelayedEntries } from '../helpers/outbox.ts';

const uri = uniqueDbUri();
let procs: ServerProcess[] = [];
let conn: Connection;

beforeAll(async () => {
  procs = await startReplicas(2, {
    MONGODB_URI: uri, RATE_LIMIT_ENABLED: 'false',
    JOBS_ENABLED: 'true', JOBS_POLL_INTERVAL_MS: '100', JOBS_RETRY_DELAY_MS: '100', JOBS_LOCK_TTL_SECONDS: '2',
    // The webhooks plugin with a 2 s processing lease instead of the built-in one (5 minutes).
    WEBHOOKS_ENABLED: 'true', DISABLED_PLUGINS: 'webhooks',
    PLUGINS: './test/fixtures/webhooks-short-lease-plugin.ts,./test/fixtures/faults-plugin.ts,./test/fixtures/jobs-fixture-plugin.ts',
  });
  conn = await mongoose.createConnection(uri).asPromise();
}, 120_000);
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop('SIGKILL')));
  await conn?.close();
});

async function call(p: ServerProcess, method: string, path: string, json?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(p.url + path, {
    method,
    headers: { 'X-API-Key': ADMIN_KEY, ...(json !== undefined ? { 'Content-Type': 'application/json' } : {}), ...headers },
    ...(json !== undefined ? { body: JSON.stringify(json) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** A delivery of provider `slowhook`, as the provider sends it; null when the connection breaks (the process died). */
const deliver = (p: ServerProcess, body: string) =>
  fetch(`${p.url}/webhooks/slowhook`, { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Signature': hmac('sha256', body, SLOWHOOK_SECRET) }, body }).then(
    async (r) => ({ status: r.status, body: (await r.json()) as Record<string, unknown> }),
    () => null,
  );

describe('SIGKILL of a replica in the middle of its work', () => {
  let jobRunId: string;
  let survivor: ServerProcess;
  let victim: ServerProcess;
  const before: string[] = [];
  const last: string[] = [];
  let tenantId: string;

  beforeAll(async () => {
    const tenant = await call(procs[0]!, 'POST', '/admin/tenants', { name: 'sigkill' });
    tenantId = tenant.body.id;
    // A job that takes 6 s, on whichever replica picks it up: that one is the victim.
    const r = await call(procs[0]!, 'POST', '/jobs/run/sleepy', { parameters: { ms: 6000, steps: 60 } });
    expect(r.status).toBe(202);
    jobRunId = r.body.id;
    const run = await waitFor(async () => {
      const d = await conn.collection('job_runs').findOne({ _id: new mongoose.Types.ObjectId(jobRunId) });
      return d?.status === 'running' ? d : null;
    }, 'the job to run');
    const holderPid = Number(String(run.worker).split(':')[1]);
    victim = procs.find((p) => p.proc.pid === holderPid)!;
    survivor = procs.find((p) => p !== victim)!;

    // Audit entries: creates acknowledged well before the kill, and a last batch right before it.
    const create = async (name: string) => {
      const c = await call(victim, 'POST', '/projects', { name }, { 'X-Tenant-Id': tenantId });
      expect(c.status).toBe(201);
      return String(c.body._id);
    };
    for (let i = 0; i < 10; i++) before.push(await create(`before-${i}`));
    await waitFor(async () => (await conn.collection('audit_log').countDocuments({ resource: 'projects', operation: 'insert' })) === 10, 'the first audit entries');

    // An inbound webhook whose handler takes 3 s, delivered to the victim.
    void deliver(victim, JSON.stringify({ id: 'evt_kill', ms: 3000 }));
    await waitFor(() => conn.collection('faults_webhook_calls').findOne({ event_id: 'evt_kill', phase: 'start' }), 'the webhook handler to start');

    last.push(...(await Promise.all(Array.from({ length: 10 }, (_, i) => create(`last-${i}`)))));
    expect(await victim.stop('SIGKILL')).toBeNull();
  }, 90_000);

  it('the other replica finishes the job once, after the lock ttl', async () => {
    const run = await waitFor(async () => {
      const r = await call(survivor, 'GET', `/jobs/runs/${jobRunId}`);
      return ['completed', 'failed'].includes(r.body.status) ? r.body : null;
    }, 'the job to be finished by the survivor', 40_000);
    expect(run).toMatchObject({ status: 'completed', attempt: 1 });
    const calls = await conn.collection('jobs_fixture_calls').find({ run_id: jobRunId }).toArray();
    expect(calls.filter((c) => c.phase === 'start').map((c) => c.pid)).toEqual([victim.proc.pid, survivor.proc.pid]);
    expect(calls.filter((c) => c.phase === 'end').map((c) => c.pid)).toEqual([survivor.proc.pid]);
  }, 60_000);

  it('the webhook is processed once, by a redelivery after the processing lease', async () => {
    const body = JSON.stringify({ id: 'evt_kill', ms: 3000 });
    // The provider redelivers until it gets a final answer; before the lease ends the event is still `processing`.
    const final = await waitFor(async () => {
      const r = await deliver(survivor, body);
      return r && r.body?.status !== 'processing' ? r : null;
    }, 'a redelivery to process the event', 30_000, 250);
    expect(final).toMatchObject({ status: 200, body: { status: 'ok' } });
    const calls = await conn.collection('faults_webhook_calls').find({ event_id: 'evt_kill' }).toArray();
    expect(calls.filter((c) => c.phase === 'end').map((c) => c.pid)).toEqual([survivor.proc.pid]);
    const event = await conn.collection('webhook_events').findOne({ provider: 'slowhook', event_id: 'evt_kill' });
    expect(event).toMatchObject({ status: 'processed', attempts: 2 });
    // Later deliveries are duplicates: the handler does not run again.
    expect((await deliver(survivor, body))?.body).toEqual({ status: 'already_processed' });
  }, 60_000);

  it('nothing acknowledged is missing: every created document, and the audit entries of the first creates', async () => {
    const ids = [...before, ...last].map((id) => new mongoose.Types.ObjectId(id));
    expect(await conn.collection('projects').countDocuments({ _id: { $in: ids } })).toBe(20);
    const audited = new Set((await conn.collection('audit_log').find({ resource: 'projects', operation: 'insert' }).toArray()).map((a) => String(a.item_id)));
    expect(before.filter((id) => !audited.has(id))).toEqual([]);
  });

  it('every create acknowledged before the SIGKILL has its audit entry, the last 10 included (the survivor sweeps their outboxes)', async () => {
    const ids = [...before, ...last].map((id) => new mongoose.Types.ObjectId(id));
    await waitFor(async () => (await unrelayedEntries(conn.db!, 'projects')).length === 0, 'the survivor to relay the outboxes', 30_000);
    const entries = await conn.collection('audit_log').find({ resource: 'projects', operation: 'insert', item_id: { $in: ids } }).toArray();
    expect(entries.map((e) => String(e.item_id)).sort()).toEqual([...before, ...last].sort());
  }, 60_000);
});
