/** Shared by bench/cpu.ts and bench/fanout.ts: the whole machine's CPU time, from `/proc/stat`. */
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

/** CPU time of the whole machine so far (µs, every core, idle and I/O wait excluded), or null off Linux. */
export function machineCpu(): number | null {
  try {
    const [, ...f] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/);
    const [user, nice, system, , , irq, softirq, steal] = f.map(Number) as number[];
    // /proc/stat counts in USER_HZ ticks: 100 a second on Linux.
    return (user! + nice! + system! + irq! + softirq! + steal!) * 10_000;
  } catch {
    return null;
  }
}

/**
 * Waits until the machine is quiet: a `windowMs` window in which the cores' busy share is below
 * `busy`, or no lower than the window before it (the burst has passed and what is left is the
 * background: idle servers' timers, the outbox sweep), or `maxMs` have passed. Before a write
 * measurement, so that the database's deferred work of the side measured before it (relay batches,
 * its vacuum and checkpoints) does not land in this side's window. @returns the time waited (ms)
 */
export async function settle(maxMs: number, busy = 0.25, windowMs = 500): Promise<number> {
  const start = Date.now();
  const cores = availableParallelism();
  let before = Infinity;
  while (Date.now() - start < maxMs) {
    const c0 = machineCpu();
    if (c0 === null) break;
    await new Promise((r) => setTimeout(r, windowMs));
    const share = (machineCpu()! - c0) / (windowMs * 1000 * cores);
    if (share < busy || share >= 0.9 * before) break;
    before = share;
  }
  return Date.now() - start;
}
