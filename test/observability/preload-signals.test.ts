/**
 * The tracing preload flushes spans on SIGTERM and SIGINT. Its listener must not keep alive a
 * program that has no handler of its own: Node's default (exit on the signal) is what that program
 * would get without tracing. (A bench server under the preload kept running after SIGTERM.)
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const preload = fileURLToPath(new URL('../../core/observability/tracing-preload.ts', import.meta.url));
const program = fileURLToPath(new URL('../fixtures/idle-program.ts', import.meta.url));

/** Starts the idle program under the preload with tracing on (console exporter), sends `signal`, and answers how it ended. */
async function stopWith(signal: 'SIGTERM' | 'SIGINT') {
  const child = spawn(process.execPath, ['--import', 'tsx', '--import', preload, program], {
    env: { ...process.env, OTEL_TRACES_EXPORTER: 'console', LOG_LEVEL: 'silent' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      if (out.includes('READY')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`exited early with ${code}`)));
  });
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  child.kill(signal);
  const timeout = new Promise<'still running'>((r) => setTimeout(() => r('still running'), 10_000).unref());
  const result = await Promise.race([exited, timeout]);
  if (result === 'still running') child.kill('SIGKILL');
  return result;
}

describe('the tracing preload and signals', () => {
  it.each(['SIGTERM', 'SIGINT'] as const)('a program without a %s handler still ends on it, by that signal', async (signal) => {
    const result = await stopWith(signal);
    expect(result).toEqual([null, signal]);
  }, 30_000);
});
