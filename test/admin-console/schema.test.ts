/**
 * The console is typed against admin-console/schema.graphql and src/graphql-env.d.ts (gql.tada).
 * They must be what the server prints, or `npm run typecheck` would check the console against a
 * stale schema: after a schema change run `npm run console:schema`, then `npm run typecheck`.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { builtinPlugins } from '../../builtin-plugins.ts';
import { ALL_ON, consoleSchemaFiles, staleFiles } from '../../scripts/console-schema.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ plugins: builtinPlugins(), config: { ...ALL_ON, METRICS_ENABLED: 'false' } });
});
afterAll(() => t?.close());

it('the committed console schema files are those of the running server (npm run console:schema)', () => {
  expect(staleFiles(consoleSchemaFiles(t.app.schema))).toEqual([]);
});
