/** Helpers of the developer-experience tests. */
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { TEST_SECRETS } from '../helpers/app.ts';

export const ROOT = resolve(import.meta.dirname, '../..');

/** Runs `server.ts` as `npm start` does until it exits; resolves to its exit code and output. */
export function runServerToExit(env: Record<string, string>, timeoutMs = 60_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((res, rej) => {
    const proc = spawn(process.execPath, ['--import', 'tsx', 'server.ts'], {
      cwd: ROOT,
      env: { ...process.env, NODE_ENV: 'test', LOG_LEVEL: 'info', PORT: '0', HOST: '127.0.0.1', ...TEST_SECRETS, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      rej(new Error(`server did not exit in time:\n${stdout}\n${stderr}`));
    }, timeoutMs);
    proc.once('exit', (code) => {
      clearTimeout(timer);
      res({ code, stdout, stderr });
    });
  });
}
