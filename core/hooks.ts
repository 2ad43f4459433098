import { traced } from './observability/tracing.ts';
import { requestOf, type Actor } from './context.ts';

/** What every document lifecycle event carries (resources plugin, and any plugin writing documents). */
export interface DocumentEventBase {
  /** Resource name (its collection name). */
  resource: string;
  actor: Actor | null;
  /** Tenant of the document (null for documents that are not tenant-scoped). */
  tenant_id: string | null;
  ip: string | null;
  request_id: string | null;
  /** Fields the resource marks as secret: listeners must never persist or echo them. */
  secret_fields: string[];
  /** True when the operation is part of a bulk call. */
  bulk: boolean;
}

export type Doc = Record<string, unknown>;

/**
 * The common part of a document hook payload for `actor`'s change of a document of `resource`, with
 * the request's ip and id when the actor acts in a request.
 */
export function documentEventBase(resource: string, actor: Actor | null, tenantId: string | null, opts: { secret_fields?: string[]; bulk?: boolean } = {}): DocumentEventBase {
  const ctx = requestOf(actor);
  return { resource, actor, tenant_id: tenantId, ip: ctx?.ip ?? null, request_id: ctx?.requestId ?? null, secret_fields: opts.secret_fields ?? [], bulk: opts.bulk ?? false };
}

/**
 * Typed events of the hook bus: what runs inside the request, before the write. Plugins add their
 * own by declaration merging. `BEFORE_*` handlers run in registration order and may return a
 * replacement payload (defaults) or throw an `AppError` to veto (validation). Other events are
 * dispatched (`dispatch()`). Code that reacts to a change once it is made is a durable consumer of
 * the event log or a listener of the relay (docs/events.md), never a hook.
 */
export interface HookEvents {
  BEFORE_CREATE: DocumentEventBase & { data: Doc };
  BEFORE_UPDATE: DocumentEventBase & { id: string; data: Doc; old: Doc; replace: boolean };
  BEFORE_DELETE: DocumentEventBase & { id: string; old: Doc };
}

export type HookName = keyof HookEvents;
export type BeforeHook = Extract<HookName, `BEFORE_${string}`>;
/** Events other than `BEFORE_*` (e.g. `WEBHOOK_RECEIVED`): dispatched with `dispatch()`. */
export type DispatchHook = Exclude<HookName, BeforeHook>;

export type BeforeHandler<K extends BeforeHook> = (
  payload: HookEvents[K],
) => void | HookEvents[K] | Promise<void | HookEvents[K]>;
export type HookHandler<K extends HookName> = K extends BeforeHook ? BeforeHandler<K> : (payload: HookEvents[K]) => void | Promise<void>;

/** Options of a hook subscription. */
export interface HookOptions {
  /**
   * Only events whose payload names one of these resources (`payload.resource`, document events)
   * reach the handler. A resource write with no `BEFORE_UPDATE` handler for its resource updates in
   * one database command instead of a read and a write (bench/history/performance.md): name the resources a
   * `BEFORE_*` handler is for whenever it is not for all of them.
   */
  resources?: readonly string[];
}

/** A hook subscription as a plugin contributes it from `setup()`. */
export interface HookRegistration<K extends HookName = HookName> extends HookOptions {
  event: K;
  handler: HookHandler<K>;
}

/** Helper that keeps the event name and handler type tied together. */
export const onHook = <K extends HookName>(event: K, handler: HookHandler<K>, opts: HookOptions = {}): HookRegistration =>
  ({ event, handler, ...(opts.resources ? { resources: [...opts.resources] } : {}) }) as unknown as HookRegistration;

interface Entry {
  plugin: string;
  handler: (p: unknown) => unknown;
  resources: ReadonlySet<string> | null;
}

/** The entries of `list` that `payload` reaches (a resource filter skips other resources' events). */
function reached(list: Entry[], payload: unknown): Entry[] {
  if (list.every((e) => !e.resources)) return list;
  const resource = (payload as { resource?: unknown } | null)?.resource;
  return list.filter((e) => !e.resources || (typeof resource === 'string' && e.resources.has(resource)));
}

export class HookBus {
  private readonly handlers = new Map<string, Entry[]>();

  on<K extends HookName>(event: K, handler: HookHandler<K>, plugin = 'anonymous', opts: HookOptions = {}): () => void {
    const list = this.handlers.get(event) ?? [];
    const entry: Entry = { plugin, handler: handler as (p: unknown) => unknown, resources: opts.resources ? new Set(opts.resources) : null };
    list.push(entry);
    this.handlers.set(event, list);
    return () => {
      const l = this.handlers.get(event);
      if (l) this.handlers.set(event, l.filter((e) => e !== entry));
    };
  }

  /** Whether a handler listens to `event` (for `resource`'s events, when given: handlers for other resources do not count). */
  hasListeners(event: HookName, resource?: string): boolean {
    const list = this.handlers.get(event) ?? [];
    return resource === undefined ? list.length > 0 : list.some((e) => !e.resources || e.resources.has(resource));
  }

  /** Runs `BEFORE_*` handlers in order; each may replace the payload. A throw vetoes the operation. */
  async runBefore<K extends BeforeHook>(event: K, payload: HookEvents[K]): Promise<HookEvents[K]> {
    const all = this.handlers.get(event);
    if (!all?.length) return payload;
    const list = reached(all, payload);
    if (!list.length) return payload;
    return traced(`hook ${event}`, async () => {
      let current = payload;
      for (const { handler } of list) {
        const next = await handler(current);
        if (next !== undefined) current = next as HookEvents[K];
      }
      return current;
    });
  }

  /**
   * Runs the handlers of a dispatch event one after another, in registration order. A failure
   * propagates to the emitter (and later handlers do not run).
   */
  async dispatch<K extends DispatchHook>(event: K, payload: HookEvents[K]): Promise<void> {
    const all = this.handlers.get(event);
    if (!all?.length) return;
    const list = reached(all, payload);
    if (!list.length) return;
    await traced(`hook ${event}`, async () => {
      for (const { handler } of list) await handler(payload);
    });
  }
}
