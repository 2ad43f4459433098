import { definePlugin, type Plugin } from '../../core/plugin.ts';
import { AuthFailureCounter } from './auth-failures.ts';
import { createRequestLimiter } from './service.ts';
import { createLimiter } from './store.ts';

/**
 * Core plugin: the rate limiters the kernel's pipeline reads through core/rate-limit.ts. The
 * service `requestLimiter` (only with `RATE_LIMIT_ENABLED`: the kernel mounts no limit without it)
 * counts every request and operation per credential or ip, shared between replicas by a periodic
 * bulk sync; `authFailures` counts failed authentications for the kernel and every plugin that
 * authenticates (always provided: with the limiter off it refuses nothing). Loaded first, so both
 * exist when the other plugins set up.
 */
export const rateLimitPlugin: Plugin = definePlugin({
  name: 'rate-limit',
  async setup({ db, config, log, services }) {
    const on = config.RATE_LIMIT_ENABLED;
    services.provide('authFailures', new AuthFailureCounter(on ? await createLimiter(config, db, 'auth_failures', config.AUTH_FAILURE_LIMIT) : null));
    if (!on) return {};
    const requests = await createRequestLimiter(config, db, log);
    services.provide('requestLimiter', requests);
    // Closed after every plugin loaded later: this process's last counts go to the store while the database is open.
    return { close: () => requests.close() };
  },
});
