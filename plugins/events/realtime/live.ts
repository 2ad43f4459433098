import { StreamEnd } from '../public/live.ts';

/**
 * `source`, with a thrown end turned into a last {@link StreamEnd} value. A plain iterator, not an
 * async generator: `return()` must reach `source` at once while a `next()` waits (a generator
 * would queue it behind that `next()`, keeping a departed subscriber until the next event).
 */
export function settled<T>(source: AsyncIterableIterator<T> & { drain?(): T[] }): AsyncIterableIterator<T | StreamEnd> & { drain(): T[] } {
  let finished = false;
  const stop = async (): Promise<IteratorResult<T | StreamEnd>> => {
    finished = true;
    await source.return?.();
    return { value: undefined, done: true };
  };
  return {
    async next() {
      if (finished) return { value: undefined, done: true };
      try {
        return await source.next();
      } catch (err) {
        void stop();
        return { value: new StreamEnd(err), done: false };
      }
    },
    /** The values waiting now, without waiting (a channel's batch): a reader sends them together. */
    drain: () => (finished ? [] : (source.drain?.() ?? [])),
    return: stop,
    throw: stop,
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}
