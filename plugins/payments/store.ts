/**
 * The Payment documents as the payments services share them: scoped reads, the one conditional
 * transition (a compare-and-set on the current status and version that also stores the
 * `payment.<status>` event, which carries its audit entry, in the document's outbox), and the
 * in-process domain events. No Koa or GraphQL here.
 */
import { Types, type Model } from 'mongoose';
import { ConflictError, NotFoundError } from '../../core/errors.ts';
import { type AuditedChange, OUTBOX_FIELD, type OutboxEntry } from '../events/public/outbox.ts';
import type { EventLog } from '../events/index.ts';
import { isSystemActor, requestOf, type Actor } from '../../core/context.ts';
import type { HookBus, HookEvents } from '../../core/hooks.ts';
import type { Logger } from '../../core/logger.ts';
import type { ResourceService } from '../resources/index.ts';
import type { PaymentBookkeeping, PaymentRecord, PaymentStatus, refundModel } from './model.ts';
import type { LedgerService } from './ledger.ts';
import type { ProviderRegistry } from './registry.ts';

/** A payment as the API returns it: the stored fields without the bookkeeping ones. */
export type PaymentView = Omit<PaymentRecord, PaymentBookkeeping>;

/** An update of a payment: `$set` always (the transition stamps `updated_at` and `updated_by`). */
export interface Update {
  $set: Record<string, unknown>;
  $inc?: Record<string, number>;
  $push?: Record<string, unknown>;
  $pull?: Record<string, unknown>;
}

/** The after-image of `old` under `u` (top-level paths only), for the audit diff and events. */
function applied(old: PaymentRecord, u: Update): PaymentRecord {
  const out: Record<string, unknown> = { ...old, ...u.$set };
  for (const [k, n] of Object.entries(u.$inc ?? {})) out[k] = ((out[k] as number | undefined) ?? 0) + n;
  for (const [k, v] of Object.entries(u.$push ?? {})) out[k] = [...((out[k] as unknown[] | undefined) ?? []), v];
  for (const [k, v] of Object.entries(u.$pull ?? {})) out[k] = ((out[k] as unknown[] | undefined) ?? []).filter((x) => x !== v);
  return out as PaymentRecord;
}

/**
 * The outbox entry of a change of payment `cur` (at its version) that audit records as an update of
 * `payments`: `previous` is the payment as the API showed it; the object is the payment after the
 * write (the relay reads it from the document at the new version). For every Payment write of this
 * plugin (a transition, a payout's claim).
 */
export function stagePaymentChange(
  events: Pick<EventLog, 'stage'>, resource: Pick<ResourceService, 'source'>, type: string, actor: Actor, cur: PaymentRecord, opts: { bulk?: boolean } = {},
): OutboxEntry {
  const ip = requestOf(actor)?.ip ?? null;
  const audit: AuditedChange = { operation: 'update', resource: 'payments', actor_name: isSystemActor(actor) ? null : actor.name ?? null, ip };
  return events.stage(type, {
    actor, tenant_id: cur.tenant_id ? String(cur.tenant_id) : null, version: cur.version + 1,
    previous: resource.source.view(cur as never), meta: { resource: 'payments', ip, bulk: !!opts.bulk, audit },
  });
}

export interface PaymentStoreDeps {
  hooks: HookBus;
  log: Logger;
  /** The `payments` resource (its model, scope, view and outbox source). */
  resource: ResourceService;
  providers: ProviderRegistry;
  refunds: ReturnType<typeof refundModel>;
  ledger: LedgerService | null;
  /** The event log (the kernel service `events`): each transition stores `payment.<status>` with its write. */
  events: EventLog;
}

/** Compare-and-set attempts of one transition against concurrent writers before it gives up (409). */
const MAX_TRANSITION_ATTEMPTS = 50;

export class PaymentStore {
  constructor(readonly deps: PaymentStoreDeps) {}

  get model(): Model<PaymentRecord> {
    return this.deps.resource.model as unknown as Model<PaymentRecord>;
  }

  view(doc: PaymentRecord): PaymentView {
    return this.deps.resource.view(doc as unknown as Record<string, unknown>) as unknown as PaymentView;
  }

  /** The payment in the actor's scope (tenant, soft delete), with its bookkeeping fields. */
  async owned(actor: Actor, id: string): Promise<PaymentRecord> {
    if (!/^[0-9a-fA-F]{24}$/.test(id)) throw new NotFoundError('payments', id);
    const doc = await this.model.findOne({ _id: new Types.ObjectId(id), ...this.deps.resource.scope(actor) }).lean<PaymentRecord>();
    if (!doc) throw new NotFoundError('payments', id);
    return doc;
  }

  async current(id: Types.ObjectId): Promise<PaymentRecord> {
    const cur = await this.model.findById(id).lean<PaymentRecord>();
    if (!cur) throw new NotFoundError('payments', String(id));
    return cur;
  }

  actorId(actor: Actor): Types.ObjectId | null {
    return isSystemActor(actor) ? null : new Types.ObjectId(actor.id);
  }

  /**
   * One transition: a compare-and-set on `{_id, status ∈ from, version}` (plus `extra`) that also
   * writes the `payment.<new status>` event into the document's outbox (docs/events.md "Nothing is
   * lost"), with the payment before it and its audit entry, then hands it to the relay. The version term is what lets the write freeze the object of an event still waiting in
   * the outbox; a write that loses it to another writer reads the payment again. Returns null when
   * the status or `extra` condition does not hold.
   * @throws ConflictError when the payment kept changing under it (MAX_TRANSITION_ATTEMPTS)
   */
  async transition(actor: Actor, id: Types.ObjectId, from: readonly PaymentStatus[], u: Update, extra: Record<string, unknown> = {}): Promise<{ old: PaymentRecord; doc: PaymentRecord } | null> {
    const { events, resource } = this.deps;
    const read = () => this.model.findOne({ _id: id, is_deleted: false }).lean<PaymentRecord>();
    let cur = await read();
    for (let attempt = 0; attempt < MAX_TRANSITION_ATTEMPTS; attempt++) {
      if (!cur || !from.includes(cur.status)) return null;
      const status = (u.$set.status ?? cur.status) as PaymentStatus;
      const entry = stagePaymentChange(events, resource, `payment.${status}`, actor, cur);
      const update: Update = {
        ...u,
        $set: { ...u.$set, updated_at: new Date(), updated_by: this.actorId(actor), [OUTBOX_FIELD]: events.outbox.update(resource.source, cur as never, entry) },
        $inc: { ...(u.$inc ?? {}), version: 1 },
      };
      const old = await this.model
        .findOneAndUpdate({ _id: id, is_deleted: false, status: { $in: from }, version: cur.version, ...extra }, update as never, { returnDocument: 'before' })
        .lean<PaymentRecord>();
      if (old) {
        const doc = applied(old, update);
        await events.committed(resource.source, doc as never);
        return { old, doc };
      }
      const next = await read();
      // Same version: nothing else wrote a revision, so the status or `extra` condition is what failed.
      if (next && next.version === cur.version) return null;
      cur = next;
    }
    throw new ConflictError('The payment kept changing; try again', { payment_id: String(id) });
  }

  /** Who and where, for a domain event about `doc`. */
  eventBase(actor: Actor, doc: PaymentRecord) {
    return { actor, tenant_id: doc.tenant_id ? String(doc.tenant_id) : null, request_id: requestOf(actor)?.requestId ?? null };
  }

  /** Domain events never fail the payment operation that already happened: a subscriber's error is logged. */
  async emit<K extends 'PAYMENT_COMPLETED' | 'PAYMENT_REFUNDED'>(event: K, payload: HookEvents[K]): Promise<void> {
    try {
      await this.deps.hooks.dispatch(event, payload);
    } catch (err) {
      this.deps.log.error({ err, event }, 'payment event subscriber failed');
    }
  }
}
