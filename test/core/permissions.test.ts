/**
 * The permission inventory: every operation of a server with every built-in plugin and setting on,
 * REST route and GraphQL root field alike, with the permission it declares. An operation without a
 * declaration fails the test, and the committed snapshot shows any change of who may call what.
 *
 * A REST route's permission is its `auth`; a GraphQL field's is the scope map it declares with
 * `t.withAuth(scopes(...))` (kept by Pothos in the field's `extensions.pothosOptions.authScopes`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GraphQLObjectType } from 'graphql';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { builtinPlugins } from '../../builtin-plugins.ts';
import { ALL_ON } from '../../scripts/console-schema.ts';
import { PERMISSIONS, type Permission } from '../../core/permissions.ts';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ plugins: builtinPlugins(), config: { ...ALL_ON, METRICS_SERIES_ENABLED: 'true', WEBAUTHN_DEMO_ENABLED: 'true', METRICS_ENABLED: 'false' } });
});
afterAll(() => t?.close());

/** The permission a field declares, or null: its scope map must name exactly one permission. */
function fieldPermission(type: GraphQLObjectType, name: string): Permission | null {
  const options = type.getFields()[name]!.extensions?.pothosOptions as { authScopes?: unknown } | undefined;
  const scopes = options?.authScopes;
  if (!scopes || typeof scopes !== 'object') return null;
  const named = Object.entries(scopes).filter(([, on]) => on === true).map(([k]) => k);
  return named.length === 1 && PERMISSIONS.includes(named[0] as Permission) ? (named[0] as Permission) : null;
}

/** `Query.x`, `Mutation.y`, `Subscription.z` → the permission each declares (null: none). */
function graphqlOperations(): [string, Permission | null][] {
  const schema = t.app.schema;
  const roots = [schema.getQueryType(), schema.getMutationType(), schema.getSubscriptionType()].filter((r): r is GraphQLObjectType => !!r);
  return roots.flatMap((root) => Object.keys(root.getFields()).sort().map((f): [string, Permission | null] => [`${root.name}.${f}`, fieldPermission(root, f)]));
}

/** `GET /path` → the route's `auth`. */
function restOperations(): [string, string | undefined][] {
  return t.app.kernel.routes().map((r): [string, string | undefined] => [`${r.method} ${r.path}`, r.auth]).sort(([a], [b]) => a.localeCompare(b));
}

describe('permission inventory', () => {
  it('covers the whole server: REST routes and GraphQL root fields of every built-in plugin', () => {
    expect(restOperations().length).toBeGreaterThan(100);
    expect(graphqlOperations().length).toBeGreaterThan(100);
    // One known operation of each kind, so an empty or partial listing cannot pass.
    expect(restOperations()).toContainEqual(['GET /ledger/entries', 'admin']);
    expect(graphqlOperations()).toContainEqual(['Query.ledgerEntries', 'admin']);
  });

  it('every REST route declares one permission', () => {
    expect(restOperations().filter(([, auth]) => !PERMISSIONS.includes(auth as Permission)).map(([op]) => op)).toEqual([]);
  });

  it('every GraphQL query, mutation and subscription field declares one permission', () => {
    expect(graphqlOperations().filter(([, p]) => p === null).map(([op]) => op)).toEqual([]);
  });

  it('the inventory: who may call each operation', () => {
    const lines = [...restOperations(), ...graphqlOperations()].map(([op, p]) => `${op}: ${p}`);
    expect(lines.join('\n')).toMatchSnapshot();
  });
});
