import SchemaBuilder from '@pothos/core';
import { DateTimeResolver, JSONResolver, ObjectIDResolver } from 'graphql-scalars';
import type Koa from 'koa';
import { AccessDeniedError, AuthRequiredError } from './errors.ts';
import { isAdmin, type AuthUser } from './context.ts';

export interface GraphQLContext {
  user: AuthUser | null;
  requestId: string;
  koa: Koa.Context;
}

export interface BuilderTypes {
  Context: GraphQLContext;
  Scalars: {
    DateTime: { Input: Date; Output: Date | string };
    JSON: { Input: unknown; Output: unknown };
    ObjectID: { Input: string; Output: string };
  };
}

/** The shared Pothos builder every plugin's `graphql()` fragment receives. */
export type Builder = PothosSchemaTypes.SchemaBuilder<PothosSchemaTypes.ExtendDefaultTypes<BuilderTypes>>;

export function createBuilder(): Builder {
  const builder = new SchemaBuilder<BuilderTypes>({});
  builder.addScalarType('DateTime', DateTimeResolver);
  builder.addScalarType('JSON', JSONResolver);
  builder.addScalarType('ObjectID', ObjectIDResolver);
  builder.queryType({});
  builder.mutationType({});
  return builder;
}

/** @throws AuthRequiredError (code AUTH_REQUIRED in `extensions`) */
export function requireUser(ctx: GraphQLContext): AuthUser {
  if (!ctx.user) throw new AuthRequiredError();
  return ctx.user;
}

export function requireAdmin(ctx: GraphQLContext): AuthUser {
  const user = requireUser(ctx);
  if (!isAdmin(user)) throw new AccessDeniedError('Administrator role required');
  return user;
}

/** Validate GraphQL arguments with the same zod schema as the REST route (422 VALIDATION_ERROR, loc starting with `args`). */
export { parseInput } from './errors.ts';

/**
 * GraphQL arguments the client left out or sent as null removed, so the zod schema shared with
 * REST applies its defaults (`parseInput(schema, givenArgs(args))`).
 */
export const givenArgs = (args: Record<string, unknown>): Record<string, unknown> =>
  Object.fromEntries(Object.entries(args).filter(([, v]) => v !== null && v !== undefined));
