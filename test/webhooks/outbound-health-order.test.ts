/**
 * The endpoint health a batch of recorded attempts tells (plugins/webhooks/recorder.ts): as if each
 * attempt were told in the order it finished. A success then a failure of one endpoint in one batch
 * end its failing period and start another (success told first); a failure then a success end it;
 * the successful endpoints of a batch are told with one call. (Gathering attempts for 10 ms made
 * such mixed batches common: telling only an endpoint's last outcome dropped the success before a
 * failure, and an endpoint whose attempts alternated was disabled.)
 */
import { describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import { AttemptRecorder, type Attempt } from '../../plugins/webhooks/recorder.ts';
import type { WebhookDeliveryRecord } from '../../plugins/webhooks/model.ts';

function recorder() {
  const told: string[] = [];
  const deps = {
    deliveries: { collection: { bulkWrite: async (ops: unknown[]) => ({ matchedCount: ops.length }) } },
    events: { stage: () => ({ id: new Types.ObjectId().toHexString() }), committed: async () => undefined },
    health: {
      succeeded: async (ids: Types.ObjectId[]) => void told.push(`ok ${ids.map(String).sort().join(',')}`),
      failed: async (id: Types.ObjectId, at: Date) => void told.push(`failed ${String(id)} ${at.getTime()}`),
    },
    log: { warn: () => undefined },
  };
  const r = new AttemptRecorder(deps as never, { name: 'webhook_deliveries', model: {} as never, view: (d) => d });
  return { r, told };
}

const attempt = (endpointId: Types.ObjectId, ok: boolean, at: number): Attempt => ({
  d: { _id: new Types.ObjectId(), tenant_id: new Types.ObjectId(), endpoint_id: endpointId, attempts: 0, attempt_log: [], lease_owner: 'x' } as unknown as WebhookDeliveryRecord,
  set: { status: ok ? 'delivered' : 'pending', attempts: 1, next_attempt_at: null, last_attempt: { status: ok ? 200 : 500, duration_ms: 1, error: null, response_excerpt: null, attempted_at: new Date(at) } },
  endpointId,
  ok,
});

describe('endpoint health of a batch', () => {
  it('tells each endpoint its outcomes in order: successes in one call first, then the failures after them', async () => {
    const { r, told } = recorder();
    const [a, b, c] = [new Types.ObjectId(), new Types.ObjectId(), new Types.ObjectId()];
    // Finished together, so recorded in one write.
    await Promise.all([
      r.add(attempt(a, true, 1)), r.add(attempt(a, false, 2)), // a: success, then a failure
      r.add(attempt(b, false, 3)), r.add(attempt(b, true, 4)), // b: failure, then a success
      r.add(attempt(c, false, 5)), r.add(attempt(c, false, 6)), // c: failures only
    ]);
    expect(r.written.batches).toBe(1);
    expect(told).toEqual([`ok ${[String(a), String(b)].sort().join(',')}`, `failed ${String(a)} 2`, `failed ${String(c)} 6`]);
  });
});
