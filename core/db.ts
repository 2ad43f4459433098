import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import mongoose, { type Connection, type InferSchemaType, type Model, type Schema } from 'mongoose';
import type { CommandStartedEvent } from 'mongodb';
import type { Config } from '../config/index.ts';
import type { Logger } from './logger.ts';
import { guardDatabaseSockets } from './db-sockets.ts';
import type { MongoObserver } from './observability/metrics-mongo.ts';

/**
 * The model `name` on this connection, registered on first use (each app has its own connection,
 * so every plugin's models exist once per app). `collection` defaults to mongoose's pluralised name.
 * @example
 * export const auditModel = (conn: Connection) => modelOn(conn, 'AuditEntry', auditEntrySchema, 'audit_log');
 */
export function modelOn<S extends Schema>(conn: Connection, name: string, schema: S, collection?: string): Model<InferSchemaType<S>> {
  return (conn.models[name] ?? conn.model(name, schema, collection)) as Model<InferSchemaType<S>>;
}

/** No database to use: the embedded MongoDB could not start, or `MONGODB_URI` could not be reached. The message is the operator's paragraph. */
export class DatabaseUnavailableError extends Error {
  override name = 'DatabaseUnavailableError';
}

const firstLine = (err: unknown) => (err instanceof Error ? err.message : String(err)).split('\n')[0]!.trim();

export interface Database {
  conn: Connection;
  uri: string;
  /** True when the server started an embedded MongoDB for itself. */
  embedded: boolean;
  close(): Promise<void>;
}

/**
 * Connect to `MONGODB_URI`, or start an embedded MongoDB (mongodb-memory-server) whose data
 * lives under `DATA_DIR/db` and survives restarts. The driver reconnects by itself after a drop;
 * `/ready` reports the connection state meanwhile. `opts.observe` gives driver options and then gets
 * the client before it connects (metrics follow its pool and commands from the first connection); `opts.onCommand`
 * sees every command the driver sends (the test suite records query shapes with it).
 */
export async function openDatabase(
  config: Config,
  log: Logger,
  opts: { onCommand?: (event: CommandStartedEvent) => void; observe?: MongoObserver } = {},
): Promise<Database> {
  let uri = config.MONGODB_URI;
  let stopEmbedded: (() => Promise<unknown>) | undefined;
  if (!uri) {
    const { MongoBinary, MongoMemoryServer } = await import('mongodb-memory-server');
    const dbPath = resolve(config.DATA_DIR, 'db');
    mkdirSync(dbPath, { recursive: true });
    let server: InstanceType<typeof MongoMemoryServer>;
    try {
      // Find (or download) the binary first: create() would print its own stack trace on failure.
      await MongoBinary.getPath();
      server = await MongoMemoryServer.create({
        instance: { dbPath, storageEngine: 'wiredTiger', ...(config.EMBEDDED_DB_PORT ? { port: config.EMBEDDED_DB_PORT } : {}) },
        // Its own process group: Ctrl-C in a terminal (or a stop signal to `npm start`'s group)
        // would otherwise stop the database at the same moment as the server, before the server's
        // last writes (rate-limit counts, the event relay's last batch) and with a "disconnected" warning.
        // The server stops it once closed; if the server dies, mongodb-memory-server's watchdog does.
        spawn: { detached: true },
      });
    } catch (err) {
      throw new DatabaseUnavailableError(
        `Start-up failed: no MongoDB to use. MONGODB_URI is not set, so the server starts an embedded MongoDB (data in ${dbPath}), ` +
          `and that failed: ${firstLine(err)}. Either set MONGODB_URI to a running MongoDB (e.g. mongodb://localhost:27017/app), ` +
          'or set MONGOMS_SYSTEM_BINARY to the path of a local mongod binary (with MONGOMS_VERSION its version) when this machine cannot download one.',
        { cause: err },
      );
    }
    uri = server.getUri('app');
    stopEmbedded = () => server.stop({ doCleanup: false });
    log.info({ uri, dbPath }, 'embedded MongoDB started; data is kept in dbPath');
  }
  // While the database is away a query must fail fast (503) rather than hold the request:
  // no buffering of commands by mongoose (it would wait up to 10 s for a reconnect), and no longer
  // a wait for a server than a query may take (2 s at least: it also bounds the first connection).
  // monitorCommands: command events for the suite's recording (and metrics where the driver offers
  // no timing connection class, core/observability/metrics-mongo.ts): each reply is then deserialized twice.
  const observed = opts.observe?.clientOptions ?? {};
  const conn = mongoose.createConnection(uri, {
    serverSelectionTimeoutMS: Math.min(5000, Math.max(2000, config.QUERY_TIMEOUT_MS)), bufferCommands: false, autoIndex: true,
    ...observed,
    monitorCommands: !!(opts.onCommand || observed.monitorCommands),
  });
  // The driver's sockets to these hosts are guarded against hanging on a dropped connection (core/db-sockets.ts).
  const sockets = guardDatabaseSockets();
  for (const h of conn.getClient().options.hosts) if (h.port) sockets.watch(h.port);
  conn.getClient().on('serverOpening', (e: { address: string }) => sockets.watch(Number(e.address.slice(e.address.lastIndexOf(':') + 1))));
  opts.observe?.watch(conn.getClient());
  if (opts.onCommand) conn.getClient().on('commandStarted', opts.onCommand);
  // Our own close() disconnects too: that is no drop, and nothing reconnects.
  let closing = false;
  conn.on('disconnected', () => {
    if (!closing) log.warn('database disconnected; the driver is reconnecting');
  });
  conn.on('reconnected', () => log.info('database reconnected'));
  try {
    await conn.asPromise();
  } catch (err) {
    sockets.release();
    await stopEmbedded?.();
    throw new DatabaseUnavailableError(
      `Start-up failed: the MongoDB at ${config.MONGODB_URI ? 'MONGODB_URI' : 'the embedded server'} could not be reached: ${firstLine(err)}. Check MONGODB_URI (host, port, credentials) and that the server is running.`,
      { cause: err },
    );
  }
  return {
    conn,
    uri,
    embedded: !!stopEmbedded,
    async close() {
      closing = true;
      await conn.close();
      sockets.release();
      await stopEmbedded?.();
    },
  };
}
