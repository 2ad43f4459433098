export interface WriteBehindOptions {
  /** Longest time an item waits in memory before a write starts. */
  flushIntervalMs: number;
  /** Items per write; reaching it starts a write at once. */
  batchSize: number;
  /** Queue length at which `push()` makes its caller wait for the write (backpressure). */
  maxQueue: number;
}

/**
 * Write-behind queue: items are written in batches, off the caller's path, in the order pushed.
 * Writes run one at a time. A failed batch is handed to `onError` and not retried, so a broken
 * database cannot grow memory; nothing else is ever dropped.
 */
export class WriteBehindBuffer<T> {
  private queue: T[] = [];
  private timer: NodeJS.Timeout | undefined;
  private draining = false;
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
    // A running drain picks up what arrives meanwhile.
    if (this.draining) return undefined;
    if (this.queue.length >= this.opts.batchSize) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), this.opts.flushIntervalMs).unref();
    return undefined;
  }

  /** Resolves once every item pushed before the call is written (or reported to `onError`). Never rejects. */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    // `drain` only rejects if `onError` itself throws; the chain must survive that.
    this.tail = this.tail.then(() => this.drain()).catch(() => undefined);
    return this.tail;
  }

  private async drain(): Promise<void> {
    this.draining = true;
    try {
      while (this.queue.length) {
        const batch = this.queue.splice(0, this.opts.batchSize);
        try {
          await this.write(batch);
        } catch (err) {
          this.onError(err, batch);
        }
      }
    } finally {
      this.draining = false;
    }
  }
}
