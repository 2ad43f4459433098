import SchemaBuilder from '@pothos/core';
import ScopeAuthPlugin from '@pothos/plugin-scope-auth';
import { DateTimeResolver, JSONResolver, ObjectIDResolver } from 'graphql-scalars';
import type Koa from 'koa';
import type { Actor } from './context.ts';
import type { Page } from '../lib/page.ts';
import type { FrameSink, PresentedCredential } from './transport.ts';
import { permit, type Permission } from './permissions.ts';

export interface GraphQLContext {
  actor: Actor | null;
  requestId: string;
  /** The HTTP request; absent over WebSocket (graphql-ws). */
  koa?: Koa.Context;
  /** Over WebSocket: the credential the connection presented, re-checked while subscriptions run. */
  presented?: PresentedCredential;
  /** Over WebSocket: the subscription's socket, to which shared results are written directly (a `transport`'s shared results). */
  frames?: FrameSink;
}

/** The context of a field whose declared permission needs an actor: the actor is never null there. */
export type ActorContext = GraphQLContext & { actor: Actor };

export interface BuilderTypes {
  Context: GraphQLContext;
  /** One scope per permission (core/permissions.ts): a field declares its own with `t.withAuth(scopes(p))`. */
  AuthScopes: { public: boolean; user: boolean; admin: boolean; system: boolean };
  AuthContexts: { user: ActorContext; admin: ActorContext; system: ActorContext };
  Scalars: {
    DateTime: { Input: Date; Output: Date | string };
    JSON: { Input: unknown; Output: unknown };
    ObjectID: { Input: string; Output: string };
  };
}

/** The shared Pothos builder every plugin's `graphql()` fragment receives. */
export type Builder = PothosSchemaTypes.SchemaBuilder<PothosSchemaTypes.ExtendDefaultTypes<BuilderTypes>>;

export function createBuilder(): Builder {
  const builder = new SchemaBuilder<BuilderTypes>({
    plugins: [ScopeAuthPlugin],
    scopeAuth: {
      // A subscription is refused when it starts, as a query would be, not at its first event.
      authorizeOnSubscribe: true,
      // Each scope is `permit`, the check REST routes run: a refusal throws the same AppError
      // (AUTH_REQUIRED, ACCESS_DENIED and its message), which the GraphQL error mapping keeps.
      authScopes: (ctx) => ({
        public: true,
        user: () => permit('user', ctx.actor),
        admin: () => permit('admin', ctx.actor),
        system: () => permit('system', ctx.actor),
      }),
    },
  });
  builder.addScalarType('DateTime', DateTimeResolver);
  builder.addScalarType('JSON', JSONResolver);
  builder.addScalarType('ObjectID', ObjectIDResolver);
  builder.queryType({});
  builder.mutationType({});
  return builder;
}

/**
 * The scope map of `permission`, for `t.withAuth(scopes(p))` on a GraphQL field: the field's one
 * declaration of who may call it, the same value its REST route gives `auth`. Behind `user`,
 * `admin` or `system` the resolver's `ctx.actor` is typed non-null.
 */
export const scopes = <P extends Permission>(permission: P): { [K in P]: true } => ({ [permission]: true }) as { [K in P]: true };

/** Validate GraphQL arguments with the same zod schema as the REST route (422 VALIDATION_ERROR, loc starting with `args`). */
export { parseInput } from './errors.ts';

/**
 * GraphQL arguments the client left out or sent as null removed, so the zod schema shared with
 * REST applies its defaults (`parseInput(schema, givenArgs(args))`).
 */
export const givenArgs = (args: Record<string, unknown>): Record<string, unknown> =>
  Object.fromEntries(Object.entries(args).filter(([, v]) => v !== null && v !== undefined));

export type ItemRef<T> = PothosSchemaTypes.ObjectRef<PothosSchemaTypes.ExtendDefaultTypes<BuilderTypes>, T>;

/**
 * The GraphQL object of a `Page<T>` (lib/page.ts): `items` of `item` plus the four page numbers,
 * all non-null, named `name` (e.g. `JobRunPage`). Every offset-paginated list uses it.
 */
export function pageObject<T>(builder: Builder, name: string, item: ItemRef<T>) {
  const ref = builder.objectRef<Page<T>>(name);
  ref.implement({
    fields: (t) => ({
      items: t.field({ type: [item], nullable: false, resolve: (p) => p.items }),
      total: t.int({ nullable: false, resolve: (p) => p.total }),
      page: t.int({ nullable: false, resolve: (p) => p.page }),
      per_page: t.int({ nullable: false, resolve: (p) => p.per_page }),
      total_pages: t.int({ nullable: false, resolve: (p) => p.total_pages }),
    }),
  });
  return ref;
}

/** The cursors of a cursor-mode page (`next`, `prev`, `has_next`, `has_prev`), as a GraphQL object named `name`. */
export function cursorsObject(builder: Builder, name: string) {
  const ref = builder.objectRef<{ next: string | null; prev: string | null; has_next: boolean; has_prev: boolean }>(name);
  ref.implement({
    fields: (t) => ({
      next: t.exposeString('next'),
      prev: t.exposeString('prev'),
      has_next: t.exposeBoolean('has_next', { nullable: false }),
      has_prev: t.exposeBoolean('has_prev', { nullable: false }),
    }),
  });
  return ref;
}
