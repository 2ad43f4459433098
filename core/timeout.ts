/**
 * Settles like `promise`, or rejects with `reason` after `ms` milliseconds, whichever comes first.
 * The timer is always cleared; the promise itself is not cancelled.
 */
export function withTimeout<T>(promise: Promise<T>, ms: number, reason: unknown = new Error(`timed out after ${ms} ms`)): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(reason), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
