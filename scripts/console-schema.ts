/**
 * The GraphQL schema the admin console (`admin-console/`) is typed against, committed as
 * `admin-console/schema.graphql` and as gql.tada's introspection types
 * `admin-console/src/graphql-env.d.ts`.
 *
 * It is the schema of a server with every built-in plugin on (webhooks, jobs, payments and files
 * included). test/admin-console/schema.test.ts fails when the committed files differ from what
 * the server prints: run `npm run console:schema`, then `npm run typecheck`, which fails wherever a
 * console document no longer fits the schema.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { buildSchema, introspectionFromSchema, lexicographicSortSchema, printSchema, type GraphQLSchema } from 'graphql';
import { minifyIntrospection, outputIntrospectionFile } from '@gql.tada/internal';
import { corePlugins } from '../builtin-plugins.ts';

const ROOT = resolve(import.meta.dirname, '..');
export const SCHEMA_FILE = 'admin-console/schema.graphql';
export const ENV_FILE = 'admin-console/src/graphql-env.d.ts';
/** Settings that turn on every plugin's GraphQL fields. */
export const ALL_ON = { WEBHOOKS_ENABLED: 'true', JOBS_ENABLED: 'true', PAYMENTS_ENABLED: 'true', PAYMENTS_LEDGER_ENABLED: 'true', FILES_ENABLED: 'true' };

/** The two committed files, path → text, from a live server's schema. */
export function consoleSchemaFiles(schema: GraphQLSchema): Record<string, string> {
  const sdl = `${printSchema(lexicographicSortSchema(schema))}\n`;
  const introspection = introspectionFromSchema(buildSchema(sdl), { descriptions: false });
  const env = outputIntrospectionFile(minifyIntrospection(introspection), { fileType: '.d.ts', shouldPreprocess: true });
  return { [SCHEMA_FILE]: sdl, [ENV_FILE]: env };
}

/** Paths of the committed files whose text differs from `files`. */
export function staleFiles(files: Record<string, string>): string[] {
  return Object.entries(files).filter(([rel, text]) => {
    try {
      return readFileSync(resolve(ROOT, rel), 'utf8') !== text;
    } catch {
      return true;
    }
  }).map(([rel]) => rel);
}

async function main() {
  const { MongoMemoryServer } = await import('mongodb-memory-server');
  const { loadConfig } = await import('../config/index.ts');
  const { builtinPlugins } = await import('../builtin-plugins.ts');
  const { createApp } = await import('../core/kernel.ts');
  const mongo = process.env.MONGODB_URI ? null : await MongoMemoryServer.create();
  const config = loadConfig({
    NODE_ENV: 'test', LOG_LEVEL: 'silent', MONGODB_URI: process.env.MONGODB_URI ?? mongo!.getUri('console_schema'), METRICS_ENABLED: 'false',
    TOKEN_SECRET: 'console-schema-token-secret-0123456789abcdef', CURSOR_HMAC_SECRET: 'console-schema-cursor-secret-0123456789abcdef', ...ALL_ON,
  });
  const app = await createApp({ corePlugins: corePlugins(), config, plugins: builtinPlugins() });
  try {
    const files = consoleSchemaFiles(app.schema);
    for (const rel of staleFiles(files)) {
      writeFileSync(resolve(ROOT, rel), files[rel]!);
      process.stdout.write(`wrote ${rel}\n`);
    }
  } finally {
    await app.close();
    await mongo?.stop();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
