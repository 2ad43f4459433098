/**
 * The `als` side of bench/observability-sides.ts: metrics on, tracing off, but one AsyncLocalStorage
 * enabled for the whole process and every request run inside it, as the OpenTelemetry context
 * manager does while tracing is on (`AsyncLocalStorageContextManager.with` is `als.run(context, fn)`;
 * core/observability/tracing-http.ts calls it once per request, around the Koa chain). Loaded with `--import`
 * after the tracing preload; patches `http.Server.prototype.emit` so each `request` event runs in
 * `als.run({}, ...)` with a fresh store (the tracing side makes a new context object per request).
 * On Node 24 and later (`AsyncContextFrame`) that costs a context frame per async resource and no
 * promise hooks; on Node 20 the first `run` enabled promise hooks for every promise of the process.
 * That is the cost this side isolates. Bench only.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { Server } from 'node:http';

const als = new AsyncLocalStorage<object>();
const emit = Server.prototype.emit as (this: Server, event: string | symbol, ...args: unknown[]) => boolean;
Server.prototype.emit = function (this: Server, event: string | symbol, ...args: unknown[]): boolean {
  if (event !== 'request') return emit.apply(this, [event, ...args]);
  return als.run({}, () => emit.apply(this, [event, ...args]));
};
