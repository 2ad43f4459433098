export interface WriteBehindOptions {
  /** Longest time an item waits in memory before a write starts. */
  flushIntervalMs: number;
  /** Items per write; reaching it starts a write at once. */
  batchSize: number;
  /** Queue length at which `push()` makes its caller wait for the write (backpressure). */
  maxQueue: number;
  /**
   * A batch whose write failed with an error `when` accepts (the database unreachable) goes back
   * to the head of the queue and is written again after `delayMs`, instead of being reported.
   */
  retry?: { when: (err: unknown) => boolean; delayMs: number };
}

/**
 * Write-behind queue: items are written in batches, off the caller's path, in the order pushed.
 * A write starts when `flushIntervalMs` has passed since the oldest unwritten item arrived, when
 * `batchSize` items are waiting, or on `flush()`. Writes run one at a time; items that arrive during
 * a write wait for their own interval or a full batch rather than following at once, so under load
 * the database sees one large write per interval, not a stream of small ones. A failed batch is
 * handed to `onError` and not retried, so a broken database cannot grow memory; nothing else is
 * ever dropped. With `retry`, a batch that failed because the database was unreachable is kept
 * and written again once it is back (an outage loses nothing), unless `flush()` was called (on
 * shutdown, or by a full queue: the memory bound still holds), which reports it as before.
 */
export class WriteBehindBuffer<T> {
  private queue: T[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** A drain is chained on `tail` and has not started yet. */
  private drainQueued = false;
  private tail: Promise<void> = Promise.resolve();

  constructor(
    private readonly write: (batch: T[]) => Promise<void>,
    private readonly onError: (err: unknown, batch: T[]) => void,
    private readonly opts: WriteBehindOptions,
  ) {}

  /** Items not yet handed to a write. */
  get size(): number {
    return this.queue.length;
  }

  /**
   * Queue an item. Returns a promise only when the queue is full: the caller should await it
   * (it resolves once the queue has been written, and never rejects).
   */
  push(item: T): Promise<void> | undefined {
    this.queue.push(item);
    if (this.queue.length >= this.opts.maxQueue) return this.flush();
    if (this.queue.length >= this.opts.batchSize) {
      if (!this.drainQueued) void this.start(false);
    } else {
      this.timer ??= setTimeout(() => void this.start(false), this.opts.flushIntervalMs).unref();
    }
    return undefined;
  }

  /** Resolves once every item pushed before the call is written (or reported to `onError`). Never rejects. */
  flush(): Promise<void> {
    return this.start(true);
  }

  private start(final: boolean): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.drainQueued = true;
    // `drain` only rejects if `onError` itself throws; the chain must survive that.
    this.tail = this.tail.then(() => this.drain(final)).catch(() => undefined);
    return this.tail;
  }

  /** Writes what is queued when it starts; later items have armed their own timer (see `push`). */
  private async drain(final: boolean): Promise<void> {
    this.drainQueued = false;
    let left = this.queue.length;
    while (left > 0) {
      const batch = this.queue.splice(0, Math.min(left, this.opts.batchSize));
      left -= batch.length;
      try {
        await this.write(batch);
      } catch (err) {
        const retry = this.opts.retry;
        if (final || !retry?.when(err)) {
          this.onError(err, batch);
          continue;
        }
        this.queue.unshift(...batch);
        clearTimeout(this.timer);
        this.timer = setTimeout(() => void this.start(false), retry.delayMs).unref();
        return;
      }
    }
  }
}
