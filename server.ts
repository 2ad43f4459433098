import { ConfigError, readConfig } from './config/index.ts';
import { loadPlugins, corePlugins } from './builtin-plugins.ts';
import { createApp } from './core/kernel.ts';
import { createLogger } from './core/logger.ts';
import { DatabaseUnavailableError } from './core/db.ts';
import { PluginError } from './core/plugin.ts';

let debug = false;

/**
 * What an operator reads when start-up fails: one line naming the plugin and the cause for a
 * plugin mistake, the settings at fault for a configuration mistake, one paragraph when no
 * database is reachable. A stack trace only for an unexpected error, or with LOG_LEVEL=debug.
 */
function startupFailure(err: unknown): string {
  if (err instanceof ConfigError) return err.message;
  if (err instanceof PluginError) {
    const line = `Start-up failed: ${err.message.replace(/:?\s*\n\s*/g, (sep) => (sep.startsWith(':') ? ': ' : '; '))}`;
    const cause = err.cause instanceof Error && !(err.cause instanceof PluginError) ? err.cause : undefined;
    return debug && cause?.stack ? `${line}\n${cause.stack}` : line;
  }
  if (err instanceof DatabaseUnavailableError) return err.message;
  return `Start-up failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`;
}

async function main() {
  const { config, warnings } = readConfig();
  debug = config.LOG_LEVEL === 'debug' || config.LOG_LEVEL === 'trace';
  const log = createLogger(config.LOG_LEVEL);
  for (const { setting, replacement, message } of warnings) log.warn({ setting, replacement }, message);
  const app = await createApp({ corePlugins: corePlugins(), config, plugins: await loadPlugins(config), logger: log });
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down: finishing in-flight requests');
    app.close().then(
      () => {
        log.info('stopped');
        process.exit(0);
      },
      (err: unknown) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  // Before listening: a signal right after the "listening" line must find its handler.
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  const port = await app.listen();
  const { on, off } = app.kernel.pluginStates();
  // Plugins a setting keeps off are loaded but serve nothing: listed apart, with the setting that turns each on.
  log.info({ port, plugins: on, plugins_off: off }, `listening on http://localhost:${port}`);
}

main().catch((err: unknown) => {
  process.stderr.write(`${startupFailure(err)}\n`);
  process.exit(1);
});
