import { definePlugin, type Plugin } from '../../core/plugin.ts';
import { Idempotency } from './http.ts';

/**
 * Core plugin: the `Idempotency-Key` store (service `idempotency`), which the kernel's pipeline
 * runs on POST and PATCH routes, GraphQL mutations and operations over WebSocket. Its stored
 * answers copy what requests returned, personal values included, so they are declared as personal
 * data and an erasure scrubs them.
 */
export const idempotencyPlugin: Plugin = definePlugin({
  name: 'idempotency',
  setup({ db, config, log, services }) {
    const store = new Idempotency(db, {
      ttlMs: config.IDEMPOTENCY_TTL_HOURS * 3_600_000, leaseMs: config.IDEMPOTENCY_LEASE_SECONDS * 1000, graphqlPath: '/graphql', maxTokens: config.GRAPHQL_MAX_TOKENS,
    }, log);
    services.provide('idempotency', store);
    return { personalData: [store.personalData()] };
  },
});
