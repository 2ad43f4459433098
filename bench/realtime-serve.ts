/**
 * The server side of bench/realtime.ts, in its own process so that its memory is measured alone:
 * an app with a bench plugin (`POST /bench-events` appends one event `bench.tick` whose data
 * carries the client's send time), answering IPC requests for its counters (`stats`): heap and
 * RSS, the realtime tail's queries and every database command the driver sent.
 *
 * Started by bench/realtime.ts with `MONGODB_URI`; prints nothing, sends `{ port }` when listening.
 */
import { performance } from 'node:perf_hooks';
import { z } from 'zod';
import { loadConfig } from '../config/index.ts';
import { createApp } from '../core/kernel.ts';
import { createLogger } from '../core/logger.ts';
import { definePlugin } from '../core/plugin.ts';
import { defineRoute } from '../core/http/route.ts';
import { corePlugins } from '../builtin-plugins.ts';

const tick = z.object({ sent_at: z.number(), n: z.number().int() });
const benchPlugin = definePlugin({
  name: 'bench-realtime',
  setup({ services }) {
    const events = services.get('events');
    return {
      eventTypes: [{ name: 'bench.tick', description: 'A bench event', data: tick }],
      routes: [
        defineRoute({
          method: 'POST', path: '/bench-events', auth: 'admin', body: tick, status: 201,
          // Appended directly: the event reaches subscribers through the tail's poll, as one
          // written on another replica would (the relay's immediate push does not apply).
          handler: ({ actor, body }) => events.append('bench.tick', { actor, tenant_id: '5f0000000000000000000001', data: body }).then((e) => ({ id: e.id })),
        }),
      ],
    };
  },
});

const config = loadConfig({
  NODE_ENV: 'production', LOG_LEVEL: 'silent', MONGODB_URI: process.env.MONGODB_URI!, RATE_LIMIT_ENABLED: 'false', AUDIT_LOG_ENABLED: 'false', METRICS_ENABLED: 'false',
  ADMIN_API_KEY: process.env.ADMIN_API_KEY!, TOKEN_SECRET: 'bench-token-secret-0123456789abcdef0123456789', CURSOR_HMAC_SECRET: 'bench-cursor-secret-0123456789abcdef01234567',
});
const app = await createApp({ corePlugins: corePlugins(), config, plugins: [benchPlugin], logger: createLogger('silent') });
// Every database operation of the app but the bench's own writes (mongoose's debug hook sees model and collection calls).
let commands = 0;
/** The same, by `collection.method`, to tell what grows with subscribers. */
const byKind: Record<string, number> = {};
(app.db.conn as unknown as { base: { set(k: string, v: unknown): void } }).base.set('debug', (coll: string, method: string) => {
  if (method === 'insertOne') return;
  commands++;
  byKind[`${coll}.${method}`] = (byKind[`${coll}.${method}`] ?? 0) + 1;
});
const port = await app.listen(0, '127.0.0.1');
process.on('message', (m: { type: string }) => {
  if (m.type === 'stats') {
    (globalThis as { gc?: () => void }).gc?.();
    const mem = process.memoryUsage();
    process.send!({ type: 'stats', heap: mem.heapUsed, external: mem.external, rss: mem.rss, commands, by_kind: { ...byKind }, elu: performance.eventLoopUtilization(), cpu: process.cpuUsage(), at: performance.now(), ...app.services.get('realtime').stats() });
  } else if (m.type === 'stop') void app.close().then(() => process.exit(0));
});
process.send!({ type: 'ready', port });
