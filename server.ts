import { ConfigError, readConfig } from './config/index.ts';
import { loadPlugins } from './config/plugins.ts';
import { createApp, PluginError } from './core/kernel.ts';
import { createLogger } from './core/logger.ts';

async function main() {
  const { config, warnings } = readConfig();
  const log = createLogger(config.LOG_LEVEL);
  for (const { setting, replacement, message } of warnings) log.warn({ setting, replacement }, message);
  const app = await createApp({ config, plugins: await loadPlugins(config), logger: log });
  const port = await app.listen();
  log.info({ port, plugins: app.kernel.plugins() }, `listening on http://localhost:${port}`);

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
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((err: unknown) => {
  // Readable start-up failures (bad config, bad plugin list) without a stack trace.
  if (err instanceof ConfigError || err instanceof PluginError) process.stderr.write(`${err.message}\n`);
  else process.stderr.write(`Start-up failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
