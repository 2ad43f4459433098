/**
 * Starts tracing before the server's modules load: `tsx --import ./core/observability/tracing-preload.ts server.ts`
 * (what `npm start` runs). Instrumentations patch modules as they are loaded, so they must be
 * registered first: CommonJS packages (mongodb, mongoose, graphql, koa's lib) through
 * require-in-the-middle, and ES modules through import-in-the-middle's loader hook, registered
 * here in-thread with `module.registerHooks` (import-in-the-middle's `register-hooks.mjs`; the
 * off-thread `module.register` is deprecated from Node 26). Does nothing unless tracing is
 * requested (docs/observability.md).
 */
import { register } from 'import-in-the-middle/register-hooks.mjs';
import { ConfigError, readConfig, tracingRequested } from '../../config/index.ts';

let settings;
try {
  settings = readConfig().config;
} catch (err) {
  // server.ts reports a bad configuration with its readable message; nothing to trace then.
  if (!(err instanceof ConfigError)) throw err;
}
if (settings && tracingRequested(settings)) {
  register({ include: ['koa', 'graphql', 'mongodb', 'http', 'https', 'node:http', 'node:https'] });
  const { startTracing } = await import('./tracing-sdk.ts');
  const stop = startTracing(settings);
  // Flush what is buffered when the server stops (server.ts exits after closing the app).
  process.once('beforeExit', () => void stop());
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => {
      // A listener replaces Node's default of exiting on the signal. When the program preloaded
      // here has no handler of its own, nothing would ever exit: flush, then raise the signal again
      // with no listener left, so the process ends as it would have without tracing.
      void stop().finally(() => {
        if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
      });
    });
  }
}
