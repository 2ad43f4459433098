import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import mongoose, { type Connection, type InferSchemaType, type Model, type Schema } from 'mongoose';
import type { Config } from '../config/index.ts';
import type { Logger } from './logger.ts';

/**
 * The model `name` on this connection, registered on first use (each app has its own connection,
 * so every plugin's models exist once per app). `collection` defaults to mongoose's pluralised name.
 * @example
 * export const auditModel = (conn: Connection) => modelOn(conn, 'AuditEntry', auditEntrySchema, 'audit_log');
 */
export function modelOn<S extends Schema>(conn: Connection, name: string, schema: S, collection?: string): Model<InferSchemaType<S>> {
  return (conn.models[name] ?? conn.model(name, schema, collection)) as Model<InferSchemaType<S>>;
}

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
 * `/ready` reports the connection state meanwhile. `observe` gets the driver's client before it
 * connects (metrics follow its pool and command events from the first connection).
 */
export async function openDatabase(config: Config, log: Logger, observe?: (client: ReturnType<Connection['getClient']>) => void): Promise<Database> {
  let uri = config.MONGODB_URI;
  let stopEmbedded: (() => Promise<unknown>) | undefined;
  if (!uri) {
    const { MongoMemoryServer } = await import('mongodb-memory-server');
    const dbPath = resolve(config.DATA_DIR, 'db');
    mkdirSync(dbPath, { recursive: true });
    const server = await MongoMemoryServer.create({
      instance: { dbPath, storageEngine: 'wiredTiger', ...(config.EMBEDDED_DB_PORT ? { port: config.EMBEDDED_DB_PORT } : {}) },
    });
    uri = server.getUri('app');
    stopEmbedded = () => server.stop({ doCleanup: false });
    log.info({ uri, dbPath }, 'embedded MongoDB started; data is kept in dbPath');
  }
  // monitorCommands: command events for metrics (`observe`, core/metrics-mongo.ts); the pool's events come regardless.
  const conn = mongoose.createConnection(uri, { serverSelectionTimeoutMS: 5000, autoIndex: true, monitorCommands: !!observe });
  if (observe) observe(conn.getClient());
  conn.on('disconnected', () => log.warn('database disconnected; the driver is reconnecting'));
  conn.on('reconnected', () => log.info('database reconnected'));
  await conn.asPromise();
  return {
    conn,
    uri,
    embedded: !!stopEmbedded,
    async close() {
      await conn.close();
      await stopEmbedded?.();
    },
  };
}
