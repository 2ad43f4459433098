/** Shared by bench/cpu.ts and bench/fanout.ts: the whole machine's CPU time, from `/proc/stat`. */
import { readFileSync } from 'node:fs';

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
