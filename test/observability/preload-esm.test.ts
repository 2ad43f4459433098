/**
 * The tracing preload also patches ES-module imports of the instrumented packages (its import hook),
 * and starts without a deprecation warning on the pinned runtime.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const preload = fileURLToPath(new URL('../../core/observability/tracing-preload.ts', import.meta.url));
const program = fileURLToPath(new URL('../fixtures/esm-http-program.ts', import.meta.url));

describe('the tracing preload and ES modules', () => {
  it('a named ES-module import of node:http sends the active trace on an outgoing request; no deprecation warning', async () => {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--import', preload, program], {
      env: { ...process.env, OTEL_TRACES_EXPORTER: 'console', LOG_LEVEL: 'silent' },
      timeout: 50_000,
    });
    // The console exporter prints the spans too; the program's own answer is its one JSON line.
    const line = stdout.split('\n').find((l) => l.startsWith('{"traceparent"'));
    expect(line, stdout).toBeDefined();
    const { traceparent, traceId } = JSON.parse(line!) as { traceparent: string; traceId: string };
    expect(traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    expect(stderr).not.toContain('DeprecationWarning');
  }, 60_000);
});
