import { rmSync } from 'node:fs';
import { resolve } from 'node:path';
import type { TestProject } from 'vitest/node';
import { MongoMemoryServer } from 'mongodb-memory-server';
import { checkSharding } from '../sharding/check.ts';
import { buildConsole } from '../../scripts/build-console.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    mongoUri: string;
    /** Where test apps record the query shapes they send (test/helpers/command-log.ts). */
    commandsDir: string;
  }
}

/**
 * One database server for the whole run; every test file gets its own database on it. At the end,
 * the sharding check reads the query shapes the run recorded: a tenant-scoped query without
 * `tenant_id` that is not on the allowlist, or one with no index led by `tenant_id`, fails the run
 * (the error is printed and the exit code set to 1).
 */
export default async function setup(project: TestProject) {
  // The admin console's tests serve the built app: build it when its sources changed (no build output is committed).
  await buildConsole({ quiet: true });
  const server = await MongoMemoryServer.create();
  const commandsDir = resolve(import.meta.dirname, `../../.tmp/commands/run-${process.pid}-${Date.now()}`);
  project.provide('mongoUri', server.getUri());
  project.provide('commandsDir', commandsDir);
  return async () => {
    try {
      await checkSharding(commandsDir, server.getUri());
    } catch (err) {
      // vitest 4 prints a global teardown's error but still exits 0: fail the run ourselves.
      process.exitCode = 1;
      throw err;
    } finally {
      rmSync(commandsDir, { recursive: true, force: true });
      await server.stop();
    }
  };
}
