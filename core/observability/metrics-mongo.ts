import { createRequire } from 'node:module';
import type { Metrics } from './metrics.ts';
import { LATENCY_BUCKETS } from './metrics.ts';

/** The MongoClient events the pool series follow (mongoose's `connection.getClient()`). */
export interface MongoClientEvents {
  on(event: string, listener: (e: { commandName?: string; duration?: number; address?: string }) => void): unknown;
}

/** What core/db.ts needs to follow one client: options to create it with, then its events. */
export interface MongoObserver {
  /** Driver options of the client: the timing `connectionType`, or `monitorCommands` where that is unavailable. */
  clientOptions: { connectionType?: unknown; monitorCommands?: boolean };
  /** Follows the created client's pool (and command events when `monitorCommands` is the fallback). */
  watch(client: MongoClientEvents): void;
}

/** The driver's connection class, as far as a subclass needs it. */
type DriverConnection = new (...args: never[]) => { established?: boolean; command(ns: unknown, cmd: Record<string, unknown>, ...rest: unknown[]): Promise<unknown> };

/** Commands of the connection handshake and heartbeats: driver-internal, not the application's. */
const INTERNAL = new Set(['hello', 'ismaster', 'isMaster']);

/**
 * The driver's `Connection` class (the copy mongoose uses), or null when this driver's layout is not
 * the one known here (then command events are the fallback).
 */
function driverConnection(): DriverConnection | null {
  try {
    const fromMongoose = createRequire(createRequire(import.meta.url).resolve('mongoose'));
    const { Connection } = fromMongoose('mongodb/lib/cmap/connection.js') as { Connection?: DriverConnection };
    return typeof Connection?.prototype.command === 'function' ? Connection : null;
  } catch {
    return null;
  }
}

/**
 * The driver's connection-pool (CMAP) events and command durations, turned into series: pool size
 * (connections open), in use (checked out), waiting (check-outs started and not yet served), and
 * command round-trip time by command name and outcome.
 *
 * Command times come from a subclass of the driver's connection passed as the client's
 * `connectionType` (a driver option for custom connection types): it times each `command` call of
 * this client's connections. The driver's command monitoring (`monitorCommands`) would do the same,
 * but for each reply it builds event objects and deserializes the whole reply a second time
 * (`CommandSucceededEvent`), a cost paid by every query (docs/observability.md "Overhead"); it stays
 * the fallback when the driver has no such class where expected. Pool gauges are counted in memory
 * from the events (reading the pool would need driver internals) and handed to the registry at
 * scrape time, so a check-out costs an addition, not a series update.
 */
export function observeMongo(metrics: Metrics): MongoObserver {
  const counts = { total: 0, in_use: 0, waiting: 0 };
  metrics.gauge({
    name: 'mongodb_pool_connections', help: 'MongoDB connection pool: connections open, by state (total, in_use, waiting)', labelNames: ['state'],
    collect() {
      for (const [state, n] of Object.entries(counts)) this.set({ state }, n);
    },
  });
  const commands = metrics.histogram({ name: 'mongodb_command_duration_seconds', help: 'MongoDB commands: round-trip time, by command name and outcome', labelNames: ['command', 'outcome'], buckets: LATENCY_BUCKETS });
  const observe = (command: string, outcome: 'ok' | 'error', seconds: number) => commands.observe({ command, outcome }, seconds);

  const Connection = driverConnection();
  const TimedConnection = Connection && class extends Connection {
    override async command(ns: unknown, cmd: Record<string, unknown>, ...rest: unknown[]): Promise<unknown> {
      const name = Object.keys(cmd)[0];
      if (!this.established || !name || INTERNAL.has(name)) return super.command(ns, cmd, ...rest);
      const start = performance.now();
      try {
        const reply = await super.command(ns, cmd, ...rest);
        observe(name, 'ok', (performance.now() - start) / 1000);
        return reply;
      } catch (err) {
        observe(name, 'error', (performance.now() - start) / 1000);
        throw err;
      }
    }
  };

  return {
    clientOptions: TimedConnection ? { connectionType: TimedConnection } : { monitorCommands: true },
    watch(client) {
      client.on('connectionCreated', () => void counts.total++);
      client.on('connectionClosed', () => void counts.total--);
      client.on('connectionCheckOutStarted', () => void counts.waiting++);
      client.on('connectionCheckOutFailed', () => void counts.waiting--);
      client.on('connectionCheckedOut', () => {
        counts.in_use++;
        counts.waiting--;
      });
      client.on('connectionCheckedIn', () => void counts.in_use--);
      if (TimedConnection) return;
      // Driver-internal commands (hello, heartbeats) are not monitored; these are the application's.
      client.on('commandSucceeded', (e) => observe(e.commandName ?? 'unknown', 'ok', (e.duration ?? 0) / 1000));
      client.on('commandFailed', (e) => observe(e.commandName ?? 'unknown', 'error', (e.duration ?? 0) / 1000));
    },
  };
}
