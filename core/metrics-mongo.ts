import type { Metrics } from './metrics.ts';
import { LATENCY_BUCKETS } from './metrics.ts';

/** The MongoClient events the pool and command series follow (mongoose's `connection.getClient()`). */
export interface MongoClientEvents {
  on(event: string, listener: (e: { commandName?: string; duration?: number; address?: string }) => void): unknown;
}

/**
 * The driver's connection-pool (CMAP) and command-monitoring events, turned into series: pool
 * size (connections open), in use (checked out), waiting (check-outs started and not yet served),
 * and command duration by command name (needs `monitorCommands: true`, set in core/db.ts). Gauges
 * are kept in memory from the events: reading the pool at scrape time would need driver internals.
 */
export function observeMongo(metrics: Metrics, client: MongoClientEvents): void {
  const pool = metrics.gauge({ name: 'mongodb_pool_connections', help: 'MongoDB connection pool: connections open, by state (total, in_use, waiting)', labelNames: ['state'] });
  const commands = metrics.histogram({ name: 'mongodb_command_duration_seconds', help: 'MongoDB commands: round-trip time, by command name and outcome', labelNames: ['command', 'outcome'], buckets: LATENCY_BUCKETS });
  for (const state of ['total', 'in_use', 'waiting']) pool.set({ state }, 0);
  const add = (state: string, by: number) => () => pool.inc({ state }, by);
  client.on('connectionCreated', add('total', 1));
  client.on('connectionClosed', add('total', -1));
  client.on('connectionCheckedOut', () => {
    pool.inc({ state: 'in_use' }, 1);
    pool.inc({ state: 'waiting' }, -1);
  });
  client.on('connectionCheckedIn', add('in_use', -1));
  client.on('connectionCheckOutStarted', add('waiting', 1));
  client.on('connectionCheckOutFailed', add('waiting', -1));
  // Driver-internal commands (hello, heartbeats) are not monitored; these are the application's.
  client.on('commandSucceeded', (e) => commands.observe({ command: e.commandName ?? 'unknown', outcome: 'ok' }, (e.duration ?? 0) / 1000));
  client.on('commandFailed', (e) => commands.observe({ command: e.commandName ?? 'unknown', outcome: 'error' }, (e.duration ?? 0) / 1000));
}
