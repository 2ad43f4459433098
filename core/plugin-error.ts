/** Start-up failure caused by the plugin list (missing dependency, cycle, bad options, duplicate health check...). */
export class PluginError extends Error {
  override name = 'PluginError';
}

/** Errors a plugin is blamed for already: a later `blamed` keeps them as they are. */
const settled = new WeakSet<PluginError>();

/**
 * `err` as a `PluginError` naming `plugin`, whose contribution caused it. An error blamed already
 * (by a plugin that collects others' contributions) keeps its plugin; one that names it is kept as is.
 */
export function blamed(plugin: string, err: unknown): PluginError {
  if (err instanceof PluginError && settled.has(err)) return err;
  const message = err instanceof Error ? err.message : String(err);
  const out = err instanceof PluginError && message.includes(`"${plugin}"`) ? err : new PluginError(`Plugin "${plugin}": ${message}`, { cause: err });
  settled.add(out);
  return out;
}
