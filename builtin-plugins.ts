import { pathToFileURL } from 'node:url';
import type { LoadedConfig } from './config/index.ts';
import { isPlugin, PluginError, type Plugin } from './core/plugin.ts';
import { rateLimitPlugin } from './plugins/rate-limit/index.ts';
import { identityPlugin } from './plugins/identity/index.ts';
import { eventsPlugin } from './plugins/events/index.ts';
import { healthPlugin } from './plugins/health/index.ts';
import { idempotencyPlugin } from './plugins/idempotency/index.ts';
import { openapiPlugin } from './plugins/openapi/index.ts';
import { resourcesPlugin } from './plugins/resources/index.ts';
import { accessPlugin } from './plugins/access/index.ts';
import { auditPlugin } from './plugins/audit/index.ts';
import { webhooksPlugin } from './plugins/webhooks/index.ts';
import { jobsPlugin } from './plugins/jobs/index.ts';
import { paymentsPlugin } from './plugins/payments/index.ts';
import { privacyPlugin } from './plugins/privacy/index.ts';
import { webauthnPlugin } from './plugins/webauthn/index.ts';
import { mailerPlugin } from './plugins/mailer/index.ts';
import { invitationsPlugin } from './plugins/invitations/index.ts';
import { adminConsolePlugin } from './plugins/admin-console/index.ts';
import { metricsSeriesPlugin } from './plugins/metrics-series/index.ts';
import { filesPlugin } from './plugins/files/index.ts';
import { ssoPlugin } from './plugins/sso/index.ts';
import { graphiqlPlugin } from './plugins/graphiql/index.ts';

/**
 * The plugins every server loads, first and in this order: `DISABLED_PLUGINS` cannot turn them off
 * and no other plugin may take their names.
 */
export const corePlugins = (): Plugin[] => [rateLimitPlugin, identityPlugin, eventsPlugin, idempotencyPlugin, healthPlugin];

/**
 * Built-in plugins enabled by default, in any order (the kernel orders them by `dependsOn`).
 * Leave one out with `DISABLED_PLUGINS`; add your own with `PLUGINS` (module paths or package names).
 */

export const builtinPlugins = (): Plugin[] => [
  resourcesPlugin,
  accessPlugin,
  auditPlugin,
  webhooksPlugin,
  jobsPlugin,
  paymentsPlugin,
  privacyPlugin,
  webauthnPlugin,
  mailerPlugin,
  invitationsPlugin,
  ssoPlugin,
  filesPlugin,
  openapiPlugin,
  adminConsolePlugin,
  metricsSeriesPlugin,
  graphiqlPlugin,
];

/**
 * The plugin list of a running server: built-ins minus `DISABLED_PLUGINS`, plus every module named
 * in `PLUGINS` (its default export or its `plugin` export must be a plugin object).
 */
export async function loadPlugins(config: LoadedConfig, cwd = process.cwd()): Promise<Plugin[]> {
  const list = builtinPlugins().filter((p) => !config.DISABLED_PLUGINS.includes(p.name));
  for (const spec of config.PLUGINS) {
    const target = spec.startsWith('.') || spec.startsWith('/') ? new URL(spec, pathToFileURL(`${cwd}/`)).href : spec;
    let mod: { default?: unknown; plugin?: unknown };
    try {
      mod = (await import(target)) as typeof mod;
    } catch (err) {
      throw new PluginError(`PLUGINS entry "${spec}" could not be loaded: ${err instanceof Error ? err.message : String(err)}`);
    }
    const candidate = mod.default ?? mod.plugin;
    if (!isPlugin(candidate)) throw new PluginError(`PLUGINS entry "${spec}" does not export a plugin object (default export or "plugin")`);
    list.push(candidate);
  }
  return list;
}
