import { describe, expect, it } from 'vitest';
import { WriteBehindBuffer } from '../../plugins/audit/buffer.ts';
import { isDatabaseUnavailable, toAppError } from '../../core/http/map-error.ts';
import { waitFor } from '../helpers/wait.ts';

const unreachable = Object.assign(new Error('connection closed'), { name: 'MongoNetworkError' });

describe('write-behind buffer while the database is unreachable', () => {
  it('keeps a batch that failed on an unreachable database and writes it once the database is back, in order', async () => {
    let down = true;
    const writes: number[][] = [];
    const failed: number[][] = [];
    const buffer = new WriteBehindBuffer<number>(
      async (batch) => {
        if (down) throw unreachable;
        writes.push(batch);
      },
      (_err, batch) => failed.push(batch),
      { flushIntervalMs: 5, batchSize: 100, maxQueue: 1000, retry: { when: isDatabaseUnavailable, delayMs: 20 } },
    );
    buffer.push(1);
    buffer.push(2);
    await waitFor(() => buffer.size === 2 && writes.length === 0, 'a failed first write');
    buffer.push(3);
    down = false;
    await waitFor(() => writes.flat().length === 3, 'the retried write');
    expect(writes.flat()).toEqual([1, 2, 3]);
    expect(failed).toEqual([]);
  });

  it('reports other errors at once, and everything on an explicit flush (shutdown, full queue)', async () => {
    const failed: number[][] = [];
    const buffer = new WriteBehindBuffer<number>(
      async (batch) => {
        throw batch[0] === 1 ? new Error('validation') : unreachable;
      },
      (_err, batch) => failed.push(batch),
      { flushIntervalMs: 5, batchSize: 1, maxQueue: 1000, retry: { when: isDatabaseUnavailable, delayMs: 10_000 } },
    );
    buffer.push(1);
    await waitFor(() => failed.length === 1, 'the validation failure');
    buffer.push(2);
    await waitFor(() => buffer.size === 1, 'the unreachable batch back in the queue');
    await buffer.flush();
    expect(failed).toEqual([[1], [2]]);
    expect(buffer.size).toBe(0);
  });
});

describe('driver errors of an unreachable database', () => {
  it.each(['MongoNetworkError', 'MongoNetworkTimeoutError', 'MongoServerSelectionError', 'MongoNotConnectedError', 'MongoPoolClearedError', 'MongoTopologyClosedError'])(
    '%s → 503 SERVICE_UNAVAILABLE',
    (name) => {
      const e = toAppError(Object.assign(new Error('x'), { name }));
      expect([e?.status, e?.code]).toEqual([503, 'SERVICE_UNAVAILABLE']);
    },
  );
  it('mongoose buffering time-out → 503', () => {
    expect(toAppError(Object.assign(new Error('Operation `projects.find()` buffering timed out after 10000ms'), { name: 'MongooseError' }))?.status).toBe(503);
  });
});
