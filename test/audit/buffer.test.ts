import { describe, expect, it, vi } from 'vitest';
import { WriteBehindBuffer } from '../../plugins/audit/buffer.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A buffer whose writes take `writeMs` and are recorded. */
function recording(opts: { flushIntervalMs: number; batchSize: number; maxQueue: number }, writeMs = 20) {
  const writes: number[][] = [];
  let started = 0;
  const buffer = new WriteBehindBuffer<number>(
    async (batch) => {
      started++;
      await sleep(writeMs);
      writes.push(batch);
    },
    () => undefined,
    opts,
  );
  return { buffer, writes, started: () => started };
}

describe('audit write-behind buffer', () => {
  it('writes after the interval, not per item', async () => {
    const { buffer, writes } = recording({ flushIntervalMs: 40, batchSize: 100, maxQueue: 1000 });
    for (let i = 0; i < 10; i++) buffer.push(i);
    await sleep(10);
    expect(writes).toEqual([]);
    // One write with every item, however late a busy machine runs the timer.
    await vi.waitFor(() => expect(writes).toEqual([[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]]), { timeout: 5000, interval: 20 });
  });

  it('items that arrive during a write wait for their own interval instead of following at once', async () => {
    // Fake timers: the order of timer callbacks, not a busy machine's scheduling, decides.
    vi.useFakeTimers();
    try {
      const { buffer, writes, started } = recording({ flushIntervalMs: 60, batchSize: 100, maxQueue: 1000 }, 30);
      buffer.push(1);
      await vi.advanceTimersByTimeAsync(61); // the first write has started and takes 30 ms
      expect(started()).toBe(1);
      buffer.push(2);
      buffer.push(3);
      await vi.advanceTimersByTimeAsync(35); // the first write is done; the second must not have started yet
      expect(writes).toEqual([[1]]);
      expect(started()).toBe(1);
      await vi.advanceTimersByTimeAsync(60);
      expect(writes).toEqual([[1], [2, 3]]);
    } finally {
      vi.useRealTimers();
    }
  });

  it('a full batch is written at once, and flush() writes everything queued, in order', async () => {
    const { buffer, writes } = recording({ flushIntervalMs: 10_000, batchSize: 3, maxQueue: 1000 }, 5);
    for (let i = 0; i < 3; i++) buffer.push(i);
    await sleep(20);
    expect(writes).toEqual([[0, 1, 2]]);
    buffer.push(3);
    await sleep(20);
    expect(writes).toEqual([[0, 1, 2]]);
    expect(buffer.size).toBe(1);
    buffer.push(4);
    await buffer.flush();
    expect(writes).toEqual([[0, 1, 2], [3, 4]]);
    expect(buffer.size).toBe(0);
  });

  it('a full queue makes the caller wait for the write (backpressure), and a failed batch is reported once', async () => {
    const failed: number[][] = [];
    const buffer = new WriteBehindBuffer<number>(
      async (batch) => {
        if (batch.includes(0)) throw new Error('down');
      },
      (_err, batch) => failed.push(batch),
      { flushIntervalMs: 10_000, batchSize: 100, maxQueue: 2 },
    );
    expect(buffer.push(0)).toBeUndefined();
    const wait = buffer.push(1);
    expect(wait).toBeInstanceOf(Promise);
    await wait;
    expect(failed).toEqual([[0, 1]]);
    expect(buffer.size).toBe(0);
  });
});
