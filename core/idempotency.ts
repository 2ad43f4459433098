/**
 * `Idempotency-Key`: the contract between the kernel's pipeline (HTTP and GraphQL over WebSocket)
 * and the idempotency plugin, which provides the store as the service `idempotency`.
 */
import type Koa from 'koa';
import type { Actor } from './context.ts';
import type { Logger } from './logger.ts';

/** A GraphQL result as JSON carries it (`data`, `errors`, `extensions`). */
export type OperationResult = { data?: unknown; errors?: readonly unknown[]; extensions?: Record<string, unknown> };

export interface IdempotencyStore {
  /** A pure header check (`Idempotency-Key` on POST or PATCH, or a GraphQL mutation): requests without it pay nothing else. */
  applies(ctx: Koa.Context): boolean;
  /** Runs the route at most once per key and replays its stored answer (called once the body is parsed). */
  run(ctx: Koa.Context, next: Koa.Next): Promise<void>;
  /**
   * A GraphQL operation over WebSocket with `extensions.idempotencyKey`: the stored result to
   * answer with, or the reservation (`finish` with the result, or null when it threw).
   * @throws AppError 400 (bad key), 422 IDEMPOTENCY_KEY_REUSED, 409 IDEMPOTENCY_IN_PROGRESS, or a replayed stored error
   */
  reserveOperation(actor: Actor, key: string, body: object, log?: Logger): Promise<{ replay: OperationResult } | { finish(result: OperationResult | null): Promise<void> }>;
}

declare module './services.ts' {
  interface Services {
    /** The `Idempotency-Key` store (core plugin `idempotency`, always on). */
    idempotency: IdempotencyStore;
  }
}
