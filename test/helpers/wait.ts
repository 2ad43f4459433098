import { cpus, loadavg } from 'node:os';

/**
 * How much slower than an idle machine this one runs now: the one-minute load per core, at least
 * 1 and at most 4. Time-outs of tests that run server processes are multiplied by it, so a busy CI
 * machine (load 4-7 on 2 cores) gets the time it needs, and an idle one still fails fast.
 */
export function loadFactor(): number {
  const perCore = loadavg()[0]! / Math.max(1, cpus().length);
  return Math.min(4, Math.max(1, perCore));
}

/** `ms` scaled by the machine's current load (see `loadFactor`). */
export const scaled = (ms: number): number => Math.round(ms * loadFactor());

/**
 * Polls `fn` every `everyMs` until it returns something truthy, and returns that; throws naming
 * `what` after `ms` (scaled by the machine's load). Use instead of a fixed sleep.
 */
export async function waitFor<T>(fn: () => Promise<T | null | undefined | false> | T | null | undefined | false, what: string, ms = 20_000, everyMs = 50): Promise<T> {
  const end = Date.now() + scaled(ms);
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${scaled(ms)} ms waiting for ${what}`);
    await new Promise((res) => setTimeout(res, everyMs));
  }
}
