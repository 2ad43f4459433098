/**
 * An async iterator fed by pushes: what a realtime stream hands to SSE writers and GraphQL
 * subscriptions. Unlike an async generator waiting for its next value, `return()` ends it at once
 * (an unsubscribing client is not held until the next event), and runs `onEnd` exactly once.
 */
export class Channel<T> implements AsyncIterableIterator<T> {
  private readonly items: T[] = [];
  private waiter: { resolve(r: IteratorResult<T>): void; reject(err: unknown): void } | null = null;
  private failure: { err: unknown } | null = null;
  private done = false;
  private ended = false;

  constructor(private readonly onEnd: () => void = () => undefined) {}

  /** Values waiting to be read. */
  get length(): number {
    return this.items.length;
  }

  get closed(): boolean {
    return this.done;
  }

  push(value: T): void {
    if (this.done) return;
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = null;
      w.resolve({ value, done: false });
    } else this.items.push(value);
  }

  /**
   * Takes every value waiting now, without waiting (a writer that got one from `next()` sends the
   * rest of the batch with it in one write).
   */
  drain(): T[] {
    const values = this.items.splice(0);
    if (this.done && values.length) this.end();
    return values;
  }

  /** Ends after the values already pushed. */
  close(): void {
    if (this.done) return;
    this.done = true;
    if (!this.items.length) this.settle();
  }

  /** Ends with an error, after the values already pushed. */
  fail(err: unknown): void {
    if (this.done) return;
    this.failure = { err };
    this.close();
  }

  next(): Promise<IteratorResult<T>> {
    const value = this.items.shift();
    if (value !== undefined) {
      if (this.done && !this.items.length) this.end();
      return Promise.resolve({ value, done: false });
    }
    if (this.done) {
      this.end();
      return this.failure ? Promise.reject(this.failure.err) : Promise.resolve({ value: undefined, done: true });
    }
    return new Promise((resolve, reject) => (this.waiter = { resolve, reject }));
  }

  return(): Promise<IteratorResult<T>> {
    this.done = true;
    this.failure = null;
    this.items.length = 0;
    this.settle();
    return Promise.resolve({ value: undefined, done: true });
  }

  throw(err?: unknown): Promise<IteratorResult<T>> {
    this.fail(err);
    return this.return();
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    return this;
  }

  private settle(): void {
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = null;
      if (this.failure) w.reject(this.failure.err);
      else w.resolve({ value: undefined, done: true });
      this.failure = null;
    }
    this.end();
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    this.onEnd();
  }
}
