/** Start-up failure caused by the plugin list (missing dependency, cycle, bad options, duplicate health check...). */
export class PluginError extends Error {
  override name = 'PluginError';
}
