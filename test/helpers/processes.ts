import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { resolve } from 'node:path';
import { ADMIN_KEY, TEST_SECRETS } from './app.ts';
import { scaled } from './wait.ts';

const ROOT = resolve(import.meta.dirname, '../..');

/** A real server process (`server.ts`, as `npm start` runs it) on a database shared with others. */
export interface ServerProcess {
  url: string;
  port: number;
  proc: ChildProcess;
  /** Every log line the process printed (pino JSON, parsed when possible). */
  logs: Record<string, unknown>[];
  /** Send a signal and wait for the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Starts `server.ts` in a child process listening on a free port of 127.0.0.1. Several processes
 * given the same `MONGODB_URI` behave as replicas behind a load balancer. The bootstrap admin key
 * is `ADMIN_KEY` unless `env.ADMIN_API_KEY` says otherwise.
 *
 * @example
 * const uri = uniqueDbUri();
 * const [a, b] = await Promise.all([startServerProcess({ MONGODB_URI: uri }), startServerProcess({ MONGODB_URI: uri })]);
 * try { ... } finally { await Promise.all([a.stop(), b.stop()]); }
 */
export async function startServerProcess(env: Record<string, string>, opts: { timeoutMs?: number; detached?: boolean } = {}): Promise<ServerProcess> {
  const proc = spawn(process.execPath, ['--import', 'tsx', 'server.ts'], {
    cwd: ROOT,
    // Its own process group, as a terminal's foreground job: the test can signal the whole group (Ctrl-C).
    ...(opts.detached ? { detached: true } : {}),
    env: { ...process.env, NODE_ENV: 'test', LOG_LEVEL: 'info', PORT: '0', HOST: '127.0.0.1', ADMIN_API_KEY: ADMIN_KEY, ...TEST_SECRETS, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: Record<string, unknown>[] = [];
  let stderr = '';
  proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  let buf = '';
  const port = await new Promise<number>((res, rej) => {
    // A start-up takes seconds on an idle machine and much longer on a busy CI runner.
    const timer = setTimeout(() => rej(new Error(`server did not start in time:\n${stderr}`)), opts.timeoutMs ?? scaled(30_000));
    proc.once('exit', (code) => {
      clearTimeout(timer);
      rej(new Error(`server exited with ${code} before listening:\n${stderr}`));
    });
    proc.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        let parsed: Record<string, unknown>;
        try {
          parsed = JSON.parse(line) as Record<string, unknown>;
        } catch {
          parsed = { msg: line };
        }
        logs.push(parsed);
        if (typeof parsed.port === 'number' && String(parsed.msg).startsWith('listening')) {
          clearTimeout(timer);
          res(parsed.port);
        }
      }
    });
  });
  proc.removeAllListeners('exit');
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    proc,
    logs,
    async stop(signal = 'SIGTERM') {
      if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode;
      const exited = once(proc, 'exit');
      proc.kill(signal);
      const [code] = (await exited) as [number | null];
      return code;
    },
  };
}

/**
 * `n` server processes on one database, started one after the other (a rolling start). Started all
 * at once on a fresh database, the DocumentDB stand-in used on these machines fails one start-up
 * when two processes build the same indexes concurrently ("conflicting key value violates
 * exclusion constraint documents_rum_index_…"); MongoDB itself accepts concurrent identical index
 * builds.
 */
export async function startReplicas(n: number, env: Record<string, string>): Promise<ServerProcess[]> {
  const out: ServerProcess[] = [];
  try {
    for (let i = 0; i < n; i++) out.push(await startServerProcess(env));
  } catch (err) {
    // The test never gets the ones already running: stop them here, or they outlive the run.
    await Promise.all(out.map((p) => p.stop('SIGKILL')));
    throw err;
  }
  return out;
}
