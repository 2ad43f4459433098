/**
 * The webhooks service: provider registry, the receiver flow and the operator operations. No Koa
 * or GraphQL here; REST and GraphQL call the same methods, and the operator operations check their
 * actor's role here, once for both.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { Types } from 'mongoose';
import { AuthRequiredError, BadRequestError, ConflictError, NotFoundError, ValidationError } from '../../core/errors.ts';
import { PluginError } from '../../core/plugin.ts';
import { systemActor, type Actor } from '../../core/context.ts';
import type { Permissions } from '../../core/permissions.ts';
import { pageOf, type Page } from '../../lib/page.ts';
import type { Logger } from '../../core/logger.ts';
import { OUTBOX_FIELD, type OutboxSource } from '../events/public/outbox.ts';
import type { EventLog } from '../events/index.ts';
import type { Doc } from '../../core/hooks.ts';
import type { WebhookEventModel, WebhookEventRecord } from './model.ts';
import { PRESETS, type PresetName } from './presets.ts';
import {
  providerRegistration, type DeadLetterQuery, type ListQuery, type ProviderRegistrationInput, type PurgeResult, type ReceiveBody,
  type RetryResult, type WebhookEventView, type WebhookHandler,
} from './schemas.ts';
import { DuplicateDeliveries } from './duplicates.ts';
import { hmacVerifier, isCustomVerifier, unixSeconds, withinTolerance, type WebhookVerifier } from './verifiers.ts';

/** Signature header of a plain HMAC provider that names none. */
export const DEFAULT_SIGNATURE_HEADER = 'x-signature';
/** Longest stored `error` text. */
const MAX_ERROR_LENGTH = 2000;

/** A registered provider with its defaults applied. */
export interface WebhookProvider {
  provider: string;
  handler: WebhookHandler;
  secret: string;
  verifier: WebhookVerifier;
  event_id_path: string | undefined;
  event_type_path: string | undefined;
  event_id_header: string | undefined;
  event_type_header: string | undefined;
  signature_header: string;
  delivery_id_header: string | undefined;
  /** The delivery's timestamp (Unix seconds) when the provider sends one: the preset's reader, or `timestamp_header`. */
  timestamp: ((signature: string, headers: IncomingHttpHeaders) => number | undefined) | undefined;
  max_retries: number;
  /** Header names kept on the stored event (lower-case). */
  keptHeaders: Set<string>;
}

/** What `services.get('webhooks')` offers other plugins. */
export interface WebhookRegistry {
  /**
   * Registers a provider; call it from your plugin's `setup()` (with `dependsOn: ['webhooks']`).
   * @throws PluginError on a duplicate name, a missing secret, an unknown verifier or another bad parameter
   * @example services.get('webhooks').register({ provider: 'acme', secret, verifier: { type: 'hmac-sha256', prefix: 'sha256=' }, event_id_path: 'id', handler: async (payload, event) => {} })
   */
  register(input: ProviderRegistrationInput): void;
  /** Names of the registered providers. */
  providers(): string[];
}

/** The receiver's answer: HTTP status and body. */
export interface ReceiveResult {
  status: number;
  body: ReceiveBody;
}

/** The operator operations (system administrators): `WebhooksService.operator(actor)`. */
export interface WebhookOperations {
  /** Events, newest first, filtered by provider and status. */
  list(q: ListQuery): Promise<Page<WebhookEventView>>;
  /** The dead-letter queue: events whose handler failed. */
  deadLetter(q: DeadLetterQuery): Promise<Page<WebhookEventView>>;
  /**
   * Re-runs the handler of a `failed` event with its stored payload (or of a `processing` one whose
   * lease expired). `ref` is the stored id, or the provider's event id when it names exactly one event.
   * @throws NotFoundError unknown; ConflictError not failed, ambiguous, or its provider is no longer registered
   */
  retry(ref: string): Promise<RetryResult>;
  /** Deletes `processed` events created more than `days` days ago; failed and in-flight events stay. */
  purge(days: number): Promise<PurgeResult>;
}

export interface WebhooksServiceOptions {
  /** How long a claimed event stays `processing` before another delivery or a retry may take it over. */
  leaseMs: number;
  log: Logger;
  /** The event log (kernel service): a run that fails stores `webhook_event.failed` with the same write. */
  events: Pick<EventLog, 'stage' | 'committed'>;
}

/** The event type of an inbound event entering the dead-letter queue. */
export const WEBHOOK_EVENT_FAILED = 'webhook_event.failed';
/** The event type of a failed inbound event whose handler then succeeded: it left the dead-letter queue. */
export const WEBHOOK_EVENT_RECOVERED = 'webhook_event.recovered';

/** Headers always kept on a stored event, besides the provider's own (signature, ids, type). Never credentials. */
export const KEPT_HEADERS = ['content-type', 'content-length', 'user-agent', 'x-request-id'] as const;
const NEVER_KEPT = new Set(['authorization', 'cookie', 'x-api-key', 'proxy-authorization']);

const headerValue = (headers: IncomingHttpHeaders, name: string | undefined): string | undefined => {
  if (!name) return undefined;
  const v = headers[name];
  return (Array.isArray(v) ? v[0] : v) || undefined;
};

/** Reads a dotted path (`data.object.id`); ids may be strings or numbers (stringified). */
function pick(payload: Record<string, unknown>, path: string): string | undefined {
  let cur: unknown = payload;
  for (const part of path.split('.')) {
    if (!cur || typeof cur !== 'object' || Array.isArray(cur)) return undefined;
    cur = (cur as Record<string, unknown>)[part];
  }
  if (typeof cur === 'string') return cur.length ? cur : undefined;
  if (typeof cur === 'number' && Number.isFinite(cur)) return String(cur);
  return undefined;
}

const errorText = (err: unknown): string => {
  const msg = err instanceof Error ? err.message || err.name : typeof err === 'string' ? err : 'Handler failed';
  return msg.slice(0, MAX_ERROR_LENGTH);
};

export function toView(d: WebhookEventRecord): WebhookEventView {
  return {
    id: String(d._id),
    provider: d.provider,
    event_id: d.event_id,
    event_type: d.event_type ?? null,
    delivery_id: d.delivery_id ?? null,
    payload: (d.payload ?? {}) as Record<string, unknown>,
    headers: (d.headers ?? {}) as Record<string, string>,
    status: d.status as WebhookEventView['status'],
    processed_at: d.processed_at ?? null,
    error: d.error ?? null,
    retry_count: d.retry_count ?? 0,
    is_duplicate: d.is_duplicate ?? false,
    attempts: d.attempts ?? 0,
    created_at: d.created_at,
    updated_at: d.updated_at,
  };
}

/** Who may call the operator operations (the inbound events and their dead-letter queue): the one declaration the REST routes and GraphQL fields read. */
export const WEBHOOK_OPERATOR_PERMISSIONS = { operator: 'system' } as const satisfies Permissions;

export class WebhooksService implements WebhookRegistry {
  private readonly registry = new Map<string, WebhookProvider>();
  private readonly duplicates: DuplicateDeliveries;
  private readonly operations: WebhookOperations = {
    list: (q) => this.list(q),
    deadLetter: (q) => this.list({ ...q, status: 'failed' }),
    retry: (ref) => this.retry(ref),
    purge: (days) => this.purge(days),
  };

  /** `webhook_events` as an outbox source of the event log. */
  readonly source: OutboxSource;

  constructor(
    private readonly model: WebhookEventModel,
    private readonly opts: WebhooksServiceOptions,
  ) {
    this.duplicates = new DuplicateDeliveries(model);
    this.source = { name: 'webhook_events', model, view: (d: Doc) => this.eventData(d as unknown as WebhookEventRecord) };
  }

  /**
   * An inbound event as `webhook_event.failed` carries it: the operator view without the provider's
   * signature header (without any header when the provider is no longer registered).
   */
  eventData(d: WebhookEventRecord): WebhookEventView {
    const view = toView(d);
    const signature = this.registry.get(d.provider)?.signature_header.toLowerCase();
    return { ...view, headers: signature ? Object.fromEntries(Object.entries(view.headers).filter(([k]) => k.toLowerCase() !== signature)) : {} };
  }

  register(input: ProviderRegistrationInput): void {
    const res = providerRegistration.safeParse(input);
    const name = typeof (input as { provider?: unknown })?.provider === 'string' ? (input as { provider: string }).provider : '?';
    if (!res.success) {
      const lines = res.error.issues.map((i) => `  ${i.path.join('.') || '(registration)'}: ${i.message}`);
      throw new PluginError(`Webhook provider "${name}" is invalid:\n${lines.join('\n')}`);
    }
    const r = res.data;
    if (this.registry.has(r.provider)) throw new PluginError(`Webhook provider "${r.provider}" is already registered`);
    let verifier: WebhookVerifier;
    let preset: (typeof PRESETS)[PresetName] | undefined;
    if (isCustomVerifier(r.verifier)) verifier = r.verifier;
    else if (r.verifier.type === 'hmac-sha256' || r.verifier.type === 'hmac-sha512') verifier = hmacVerifier(r.verifier as Parameters<typeof hmacVerifier>[0]);
    else {
      preset = PRESETS[r.verifier.type as PresetName];
      verifier = preset.verifier;
    }
    const p: WebhookProvider = {
      provider: r.provider,
      handler: r.handler,
      secret: r.secret,
      verifier,
      event_id_path: r.event_id_path ?? (r.event_id_header ? undefined : preset?.event_id_path),
      event_type_path: r.event_type_path ?? (r.event_type_header ? undefined : preset?.event_type_path),
      event_id_header: r.event_id_header ?? (r.event_id_path ? undefined : preset?.event_id_header),
      event_type_header: r.event_type_header ?? (r.event_type_path ? undefined : preset?.event_type_header),
      signature_header: r.signature_header ?? preset?.signature_header ?? DEFAULT_SIGNATURE_HEADER,
      delivery_id_header: r.delivery_id_header ?? preset?.delivery_id_header,
      timestamp: r.timestamp_header ? (_signature, headers) => unixSeconds(headerValue(headers, r.timestamp_header)) : preset?.timestamp,
      max_retries: r.max_retries,
      keptHeaders: new Set(),
    };
    if (!p.event_id_path && !p.event_id_header) {
      throw new PluginError(`Webhook provider "${r.provider}" is invalid:\n  event_id_path: is required (or event_id_header), the event id is the idempotency key`);
    }
    const kept = [...KEPT_HEADERS, p.signature_header, p.delivery_id_header, p.event_id_header, p.event_type_header, r.timestamp_header];
    if (preset === PRESETS['standard-webhooks']) kept.push('webhook-id', 'webhook-timestamp');
    for (const h of kept) if (h && !NEVER_KEPT.has(h)) p.keptHeaders.add(h);
    this.registry.set(p.provider, p);
  }

  providers(): string[] {
    return [...this.registry.keys()];
  }

  /**
   * The operator operations: events are one collection across tenants, so they are for system
   * administrators and the system actor ({@link WEBHOOK_OPERATOR_PERMISSIONS}, checked by the route
   * and the field before the input is parsed).
   * @example await svc.operator(actor).list(query)
   */
  operator(_actor: Actor): WebhookOperations {
    return this.operations;
  }

  /**
   * The receiver flow, in this order: provider (404), signature over the raw bytes and its
   * timestamp (401), JSON (400), event id (422), then insert-first deduplication and the handler.
   */
  async receive(name: string, raw: Buffer, headers: IncomingHttpHeaders): Promise<ReceiveResult> {
    const p = this.registry.get(name);
    if (!p) throw new NotFoundError('webhook_provider', name, `Unknown webhook provider "${name}"`);
    const signature = headerValue(headers, p.signature_header);
    let valid = false;
    if (signature) {
      try {
        valid = await p.verifier.verify(raw, signature, p.secret, headers);
      } catch (err) {
        // A custom verifier that throws rejects the delivery; its error is ours to log, not the sender's to read.
        this.opts.log.warn({ err, provider: name }, 'webhook verifier threw');
      }
    }
    // A signed timestamp counts in both directions: one far ahead would keep a captured delivery replayable until then.
    const signedAt = valid === true && p.timestamp ? p.timestamp(signature!, headers) : undefined;
    if (valid !== true || (p.timestamp && (signedAt === undefined || !withinTolerance(signedAt)))) {
      throw new AuthRequiredError('Missing or invalid webhook signature');
    }

    let payload: unknown;
    try {
      payload = JSON.parse(raw.toString('utf8'));
    } catch {
      throw new BadRequestError('Malformed JSON body');
    }
    if (!payload || typeof payload !== 'object' || Array.isArray(payload)) {
      throw new ValidationError([{ loc: ['body'], msg: 'must be a JSON object', type: 'invalid_type' }]);
    }
    const body = payload as Record<string, unknown>;
    const eventId = p.event_id_path ? pick(body, p.event_id_path) : headerValue(headers, p.event_id_header);
    if (!eventId) {
      const loc = p.event_id_path ? ['body', ...p.event_id_path.split('.')] : ['headers', p.event_id_header!];
      throw new ValidationError([{ loc, msg: 'the event id is missing', type: 'missing' }]);
    }
    const eventType = (p.event_type_path ? pick(body, p.event_type_path) : headerValue(headers, p.event_type_header)) ?? null;
    const deliveryId = headerValue(headers, p.delivery_id_header) ?? null;
    const kept: Record<string, string> = {};
    for (const h of p.keptHeaders) {
      const v = headerValue(headers, h);
      if (v !== undefined) kept[h] = v;
    }

    const key = DuplicateDeliveries.key(p.provider, eventId);
    const known = this.duplicates.known(key);
    if (known && (await known)) {
      const res = await this.redelivery(p, eventId, deliveryId);
      // Gone since (deleted by hand): store it anew.
      if (res) return res;
    }
    const attempt = this.duplicates.inserting(key);
    const now = new Date();
    let created: WebhookEventRecord | undefined;
    try {
      const doc = {
        provider: p.provider, event_id: eventId, event_type: eventType, delivery_id: deliveryId, payload: body, headers: kept,
        status: 'processing', processed_at: null, error: null, retry_count: 0, is_duplicate: false,
        attempts: 1, lease_until: new Date(now.getTime() + this.opts.leaseMs), created_at: now, updated_at: now,
      };
      // The driver's insertOne: every field is set here, so mongoose's document layer adds only cost on the hot path.
      const res = await this.model.collection.insertOne(doc);
      created = { ...doc, _id: res.insertedId } as unknown as WebhookEventRecord;
    } catch (err) {
      const duplicate = (err as { code?: unknown }).code === 11000;
      attempt.settle(duplicate);
      attempt.forget();
      if (!duplicate) throw err;
    }
    if (!created) {
      // Purged between our insert attempt and now: the provider will redeliver.
      return (await this.redelivery(p, eventId, deliveryId)) ?? { status: 503, body: { status: 'processing', event_id: eventId } };
    }
    attempt.settle(true);
    try {
      return this.answer(await this.run(p, created), eventId);
    } finally {
      attempt.forget();
    }
  }

  /**
   * A delivery of an event already stored: count it, then answer from its state or claim a re-run.
   * Null when the event does not exist.
   */
  private async redelivery(p: WebhookProvider, eventId: string, deliveryId: string | null): Promise<ReceiveResult | null> {
    const existing = await this.duplicates.count(p.provider, eventId, deliveryId);
    if (!existing) return null;
    if (existing.status === 'processed') return { status: 200, body: { status: 'already_processed' } };
    const stale = existing.status === 'processing' && (!existing.lease_until || existing.lease_until < new Date());
    const rerun = existing.status === 'failed' && (existing.attempts ?? 0) <= p.max_retries;
    if (!stale && !rerun) {
      if (existing.status === 'failed') return { status: 200, body: { status: 'failed', event_id: eventId } };
      return { status: 200, body: { status: 'processing' } };
    }
    const claimed = await this.claim(existing);
    if (!claimed) return { status: 200, body: { status: 'processing' } };
    return this.answer(await this.run(p, claimed), eventId);
  }

  /** Takes an event over for a re-run: one atomic compare-and-set on its status and attempt count. */
  private claim(d: WebhookEventRecord): Promise<WebhookEventRecord | null> {
    const now = new Date();
    return this.model
      .findOneAndUpdate(
        { _id: d._id, status: d.status, attempts: d.attempts ?? 0 },
        { $set: { status: 'processing', lease_until: new Date(now.getTime() + this.opts.leaseMs), updated_at: now }, $inc: { attempts: 1 } },
        { returnDocument: 'after' },
      )
      .lean<WebhookEventRecord>();
  }

  private answer(outcome: WebhookEventRecord, eventId: string): ReceiveResult {
    return outcome.status === 'processed'
      ? { status: 200, body: { status: 'ok', event_id: eventId } }
      : { status: 500, body: { status: 'failed', event_id: eventId } };
  }

  /** Runs the handler of an event this process has claimed, as the system actor, and records the outcome. */
  private async run(p: WebhookProvider, d: WebhookEventRecord): Promise<WebhookEventRecord> {
    const actor = systemActor();
    let error: string | null = null;
    try {
      const event = {
        provider: p.provider, event_id: d.event_id, event_type: d.event_type ?? null, delivery_id: d.delivery_id ?? null,
        headers: (d.headers ?? {}) as Record<string, string>, attempt: d.attempts ?? 1, id: String(d._id), actor,
      };
      const payload = d.payload as Record<string, unknown>;
      // Outside the identity of whoever called the receiver (or the retry endpoint): the handler acts as the system (`event.actor`).
      await p.handler(payload, event);
    } catch (err) {
      error = errorText(err);
      this.opts.log.warn({ err, provider: p.provider, event_id: d.event_id }, 'webhook handler failed');
    }
    const now = new Date();
    const set = error === null
      ? { status: 'processed', processed_at: now, error: null, lease_until: null, updated_at: now }
      : { status: 'failed', error, lease_until: null, updated_at: now };
    const after = { ...d, ...set } as WebhookEventRecord;
    // A failure enters the dead-letter queue, and a success of a failed event leaves it: its event travels
    // in the document's outbox, written by the same update, with its object frozen (a retry may change
    // the document before the relay runs).
    const type = error !== null ? WEBHOOK_EVENT_FAILED : d.error ? WEBHOOK_EVENT_RECOVERED : null;
    const entry = type ? { ...this.opts.events.stage(type, { actor: null, tenant_id: null }), data: this.eventData(after) as unknown as Doc } : null;
    // Only the holder of this attempt may record its outcome (a takeover after lease expiry bumps `attempts`).
    const res = await this.model.collection.updateOne(
      { _id: d._id, status: 'processing', attempts: d.attempts ?? 1 },
      { $set: set, ...(entry ? { $push: { [OUTBOX_FIELD]: entry } } : {}) } as never,
    );
    if (entry && res.modifiedCount) await this.opts.events.committed(this.source, { ...after, [OUTBOX_FIELD]: [entry] } as unknown as Doc);
    return after;
  }

  private async list(q: ListQuery): Promise<Page<WebhookEventView>> {
    const filter: Record<string, unknown> = {};
    if (q.provider) filter.provider = q.provider;
    if (q.status) filter.status = q.status;
    const [docs, total] = await Promise.all([
      this.model.find(filter).sort({ created_at: -1, _id: -1 }).skip((q.page - 1) * q.per_page).limit(q.per_page).lean<WebhookEventRecord[]>(),
      this.model.countDocuments(filter),
    ]);
    return pageOf(docs.map(toView), total, q);
  }

  private async retry(ref: string): Promise<RetryResult> {
    let d: WebhookEventRecord | null = null;
    if (Types.ObjectId.isValid(ref) && /^[0-9a-fA-F]{24}$/.test(ref)) d = await this.model.findById(ref).lean<WebhookEventRecord>();
    if (!d) {
      const found = await this.model.find({ event_id: ref }).limit(2).lean<WebhookEventRecord[]>();
      if (found.length > 1) throw new ConflictError('Several providers have an event with this id; retry by the stored event id', { event_id: ref });
      d = found[0] ?? null;
    }
    if (!d) throw new NotFoundError('webhook_event', ref);
    const p = this.registry.get(d.provider);
    if (!p) throw new ConflictError(`Webhook provider "${d.provider}" is not registered`, { provider: d.provider });
    const stale = d.status === 'processing' && (!d.lease_until || d.lease_until < new Date());
    if (d.status !== 'failed' && !stale) throw new ConflictError(`Only failed events can be retried; this one is ${d.status}`, { status: d.status });
    const claimed = await this.claim(d);
    if (!claimed) throw new ConflictError('The event changed while retrying; it is being processed elsewhere', { status: 'processing' });
    const out = await this.run(p, claimed);
    return { id: String(out._id), event_id: out.event_id, status: out.status as WebhookEventView['status'], error: out.error ?? null };
  }

  private async purge(days: number): Promise<PurgeResult> {
    const cutoff = new Date(Date.now() - days * 86_400_000);
    const res = await this.model.deleteMany({ status: 'processed', created_at: { $lt: cutoff } });
    return { deleted_count: res.deletedCount, retention_days: days, cutoff_date: cutoff };
  }
}

