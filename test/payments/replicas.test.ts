/**
 * Race-proof across server processes: two replicas on one database share every atomic condition,
 * so parallel refunds and completions spread over both behave as on one process.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import mongoose, { Types, type Connection } from 'mongoose';
import { ADMIN_KEY, uniqueDbUri } from '../helpers/app.ts';
import { startReplicas, type ServerProcess } from '../helpers/processes.ts';

const uri = uniqueDbUri();
let procs: ServerProcess[] = [];
let conn: Connection;

beforeAll(async () => {
  procs = await startReplicas(2, { MONGODB_URI: uri, PAYMENTS_ENABLED: 'true', PAYMENTS_LEDGER_ENABLED: 'true', RATE_LIMIT_ENABLED: 'false' });
  conn = await mongoose.createConnection(uri).asPromise();
});
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()));
  await conn?.close();
});

const call = async (i: number, method: string, path: string, json?: unknown) => {
  const r = await fetch(`${procs[i % 2]!.url}${path}`, {
    method, headers: { 'X-API-Key': ADMIN_KEY, 'Content-Type': 'application/json', 'X-Tenant-Id': tenantId }, ...(json !== undefined ? { body: JSON.stringify(json) } : {}),
  });
  return { status: r.status, body: (await r.json()) as Record<string, any> };
};
let tenantId = '';

describe('two replicas', () => {
  it('20 completions and 30 refunds spread over both: one capture, never more refunded than captured', async () => {
    tenantId = (await call(0, 'POST', '/admin/tenants', { name: 'replica-shop' })).body.id;
    const p = (await call(0, 'POST', '/payments', { resource_type: 'order', resource_id: 'r', user_id: 'u', user_name: 'n', amount: '1.00', currency: 'USD', provider: 'manual' })).body;
    await call(1, 'POST', `/payments/${p._id}/process`, {});
    const done = await Promise.all(Array.from({ length: 20 }, (_, i) => call(i, 'POST', `/payments/${p._id}/complete`, { provider_reference: 'rep-1', provider_status: 'paid' })));
    expect(done.every((r) => r.status === 200 && r.body.status === 'completed')).toBe(true);
    const refunds = await Promise.all(Array.from({ length: 30 }, (_, i) => call(i, 'POST', `/payments/${p._id}/refund`, { amount: '0.07' })));
    expect(refunds.filter((r) => r.status === 200)).toHaveLength(14);
    expect(refunds.filter((r) => r.status === 400 && r.body.error.code === 'REFUND_EXCEEDS_CAPTURED')).toHaveLength(16);
    const stored = await conn.collection('payments').findOne({ _id: new Types.ObjectId(p._id) });
    expect(stored).toMatchObject({ refunded_amount: '0.98', refunded_minor: 98, refund_reserved_minor: 0, status: 'partially_refunded' });
    expect(await conn.collection('ledger_entries').countDocuments({ payment_id: new Types.ObjectId(p._id), entry_type: 'capture' })).toBe(2);
    expect(await conn.collection('ledger_entries').countDocuments({ payment_id: new Types.ObjectId(p._id), entry_type: 'refund' })).toBe(28);
  });
});
