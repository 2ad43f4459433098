/**
 * The CPU time of one bench database on the DocumentDB stand-in (../shared/docdb): its wire
 * gateway's node process and the PostgreSQL backends serving that gateway's connections, found
 * through /proc (Linux only). Other instances on the same PostgreSQL (another engineer's tests) are
 * not counted, nor PostgreSQL's shared workers (WAL writer, I/O workers, autovacuum): a measure of
 * what this database's queries cost that the machine's load moves far less than throughput. The
 * pool's backends come and go: they are sampled every `everyMs` and each one's time is kept as last
 * seen. Bench only.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/** /proc/<pid>/stat: utime + stime, in clock ticks (100 a second). */
const ticksOf = (pid: number): number | null => {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return Number(f[11]) + Number(f[12]);
  } catch {
    return null;
  }
};
const cmdline = (pid: number): string => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
};
const pids = () => readdirSync('/proc').filter((d) => /^\d+$/.test(d)).map(Number);

/** The local ports of `pid`'s TCP connections (its socket inodes matched in /proc/net/tcp). */
function localPorts(pid: number): Set<number> {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch { /* closed meanwhile */ }
  }
  const ports = new Set<number>();
  for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length > 9 && inodes.has(f[9]!)) ports.add(parseInt(f[1]!.split(':')[1]!, 16));
  }
  return ports;
}

/** Starts sampling the database listening on `uri`'s port; `micros()` is its CPU time so far (µs), null when not found. */
export function dbCpuMeter(uri: string, everyMs = 250): { micros: () => number | null; stop: () => void } {
  const port = new URL(uri).port;
  const gateway = pids().find((p) => / --port (\d+) /.exec(`${cmdline(p)} `)?.[1] === port && cmdline(p).includes('docdb/mongod'));
  if (gateway === undefined) return { micros: () => null, stop: () => undefined };
  /** Ticks of each process as last seen, and as first seen (the time before the meter started is not counted). */
  const last = new Map<number, number>();
  const first = new Map<number, number>();
  let started = false;
  const sample = () => {
    const mine = [gateway];
    try {
      const ports = localPorts(gateway);
      for (const p of pids()) {
        const m = /^postgres: .* 127\.0\.0\.1\((\d+)\)/.exec(cmdline(p));
        if (m?.[1] && ports.has(Number(m[1]))) mine.push(p);
      }
    } catch { /* the gateway exited */ }
    for (const p of mine) {
      const t = ticksOf(p);
      if (t === null) continue;
      // The processes of the first sample count from then; a backend started later, from its start.
      if (!first.has(p)) first.set(p, started ? 0 : t);
      last.set(p, t);
    }
  };
  sample();
  started = true;
  const timer = setInterval(sample, everyMs);
  timer.unref();
  return {
    micros: () => {
      sample();
      let ticks = 0;
      for (const [p, t] of last) ticks += t - (first.get(p) ?? 0);
      return ticks * 10_000;
    },
    stop: () => clearInterval(timer),
  };
}
