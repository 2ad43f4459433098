/**
 * The payments service: provider registry, the Payment lifecycle (spec document 3, state table) and
 * refunds. Every transition is one conditional `findOneAndUpdate` on the current status, so
 * concurrent callers never leave an impossible state. No Koa or GraphQL here.
 */
import { Types, type Model } from 'mongoose';
import { AppError, ConflictError, NotFoundError, ValidationError } from '../../core/errors.ts';
import { isSystemActor, requestOf, systemActor, type AuthUser } from '../../core/context.ts';
import type { HookBus, HookEvents } from '../../core/hooks.ts';
import type { Logger } from '../../core/logger.ts';
import { PluginError } from '../../core/plugin.ts';
import type { ResourceService } from '../resources/service.ts';
import type { WebhookRegistry } from '../webhooks/index.ts';
import { fromMinor, toMinor } from './money.ts';
import { PAYMENT_STATUSES, REFUNDABLE, type PaymentRecord, type PaymentStatus, type RefundRecord, type refundModel } from './model.ts';
import type { PaymentIntent, PaymentProvider, WebhookOutcome } from './providers.ts';
import type { CompleteInput, RefundInput } from './schemas.ts';
import type { LedgerService } from './ledger.ts';
import type { PayoutsService, PayoutView } from './payouts.ts';

/** A payment as the API returns it (private bookkeeping removed). */
export type PaymentView = Record<string, unknown>;

/** What `services.get('payments')` offers other plugins. */
export interface PaymentsApi {
  /**
   * Registers a provider (call it from your plugin's `setup()`, with `dependsOn: ['payments']`).
   * @throws PluginError on a bad or duplicate name, an unknown status in `status_map`, or `webhook` without `handle_webhook`
   */
  registerProvider(provider: PaymentProvider): void;
  /** Names of the registered providers. */
  providers(): string[];
  /**
   * The spec's `approve_payout(payout_id)`, as `actor` (the same rules as `POST /payouts/{id}/approve`).
   * @throws ConflictError when payments are not enabled (`PAYMENTS_ENABLED`)
   */
  approve_payout(actor: AuthUser, payoutId: string): Promise<PayoutView>;
  /** The spec's `execute_payout(payout_id, bank_reference)`, as `actor` (same rules as `POST /payouts/{id}/execute`). */
  execute_payout(actor: AuthUser, payoutId: string, bankReference: string): Promise<PayoutView>;
  /** approved (or failed, to retry) → processing: the transfer was handed to the bank (`POST /payouts/{id}/process`). */
  process_payout(actor: AuthUser, payoutId: string): Promise<PayoutView>;
  /** processing → failed with a reason: the bank rejected the transfer (`POST /payouts/{id}/fail`). */
  fail_payout(actor: AuthUser, payoutId: string, reason: string): Promise<PayoutView>;
}

/** The provider failed or answered something we cannot use: 502 `PROVIDER_ERROR`. */
export class ProviderError extends AppError {
  constructor(provider: string, message: string) {
    super(502, 'PROVIDER_ERROR', `Payment provider "${provider}" failed: ${message}`, { provider });
  }
}

/** A refund above what is left to refund: 400 (spec document 3, errors rule 1). */
export class RefundExceedsCapturedError extends AppError {
  constructor(details: Record<string, unknown>) {
    super(400, 'REFUND_EXCEEDS_CAPTURED', 'The refunds would exceed the captured amount', details);
  }
}

const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err)).slice(0, 500);

/** 409 naming the current status (and the states the operation starts from). */
export function transitionConflict(current: PaymentStatus | string, operation: string, from: readonly string[]): ConflictError {
  return new ConflictError(`Cannot ${operation} a payment that is ${current}`, { status: current, operation, allowed_from: [...from] });
}

interface Update {
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

export interface PaymentsServiceDeps {
  hooks: HookBus;
  log: Logger;
  refunds: ReturnType<typeof refundModel>;
  webhooks: WebhookRegistry;
  ledger: LedgerService | null;
}

export class PaymentsService implements PaymentsApi {
  private readonly registry = new Map<string, PaymentProvider>();
  private resource!: ResourceService;

  constructor(private readonly deps: PaymentsServiceDeps) {}

  private payouts: PayoutsService | null = null;

  /** Set once the `payments` resource is registered (`PAYMENTS_ENABLED`). */
  attach(resource: ResourceService, payouts: PayoutsService): void {
    this.resource = resource;
    this.payouts = payouts;
  }

  private payoutService(): PayoutsService {
    if (!this.payouts) throw new ConflictError('Payments are not enabled on this server (PAYMENTS_ENABLED)');
    return this.payouts;
  }

  approve_payout(actor: AuthUser, payoutId: string): Promise<PayoutView> {
    return this.payoutService().approve(actor, payoutId);
  }

  execute_payout(actor: AuthUser, payoutId: string, bankReference: string): Promise<PayoutView> {
    return this.payoutService().execute(actor, payoutId, bankReference);
  }

  process_payout(actor: AuthUser, payoutId: string): Promise<PayoutView> {
    return this.payoutService().process(actor, payoutId);
  }

  fail_payout(actor: AuthUser, payoutId: string, reason: string): Promise<PayoutView> {
    return this.payoutService().fail(actor, payoutId, reason);
  }

  get model(): Model<PaymentRecord> {
    return this.resource.model as unknown as Model<PaymentRecord>;
  }

  registerProvider(p: PaymentProvider): void {
    if (!p || typeof p.name !== 'string' || !/^[a-z0-9][a-z0-9_-]{0,63}$/.test(p.name)) throw new PluginError(`Payment provider name "${String(p?.name)}" must match [a-z0-9][a-z0-9_-]{0,63}`);
    if (this.registry.has(p.name)) throw new PluginError(`Payment provider "${p.name}" is already registered`);
    for (const fn of ['create_payment', 'refund_payment'] as const) {
      if (typeof p[fn] !== 'function') throw new PluginError(`Payment provider "${p.name}": ${fn} must be a function`);
    }
    for (const [word, status] of Object.entries(p.status_map ?? {})) {
      if (!PAYMENT_STATUSES.includes(status)) throw new PluginError(`Payment provider "${p.name}": status_map.${word} = "${String(status)}" is not a Payment status (${PAYMENT_STATUSES.join(', ')})`);
    }
    if (p.webhook) {
      if (typeof p.handle_webhook !== 'function') throw new PluginError(`Payment provider "${p.name}": webhook needs handle_webhook`);
      this.deps.webhooks.register({ ...p.webhook, provider: p.name, handler: (payload, event) => this.applyWebhook(p.name, payload, event.headers) });
    }
    this.registry.set(p.name, p);
  }

  providers(): string[] {
    return [...this.registry.keys()];
  }

  view(doc: PaymentRecord): PaymentView {
    return this.resource.view(doc as unknown as Record<string, unknown>);
  }

  /** The payment in the caller's scope (tenant, soft delete), with its bookkeeping fields. */
  async owned(user: AuthUser, id: string): Promise<PaymentRecord> {
    if (!/^[0-9a-fA-F]{24}$/.test(id)) throw new NotFoundError('payments', id);
    const doc = await this.model.findOne({ _id: new Types.ObjectId(id), ...this.resource.scope(user) }).lean<PaymentRecord>();
    if (!doc) throw new NotFoundError('payments', id);
    return doc;
  }

  private provider(name: string): PaymentProvider {
    const p = this.registry.get(name);
    if (!p) throw new ConflictError(`Payment provider "${name}" is not registered on this server`, { provider: name });
    return p;
  }

  private normalise(p: PaymentProvider, word: string): PaymentStatus | undefined {
    return Object.hasOwn(p.status_map, word) ? p.status_map[word] : undefined;
  }

  private actorId(user: AuthUser) {
    return isSystemActor(user) ? null : new Types.ObjectId(user.id);
  }

  /**
   * One transition: a single conditional update on `{_id, status ∈ from}` (plus `extra`), then the
   * audit (AFTER_UPDATE, as for every resource write). Returns null when the condition did not hold.
   */
  private async transition(actor: AuthUser, id: Types.ObjectId, from: readonly PaymentStatus[], u: Update, extra: Record<string, unknown> = {}): Promise<{ old: PaymentRecord; doc: PaymentRecord } | null> {
    const update: Update = { ...u, $set: { ...u.$set, updated_at: new Date(), updated_by: this.actorId(actor) }, $inc: { ...(u.$inc ?? {}), version: 1 } };
    const old = await this.model
      .findOneAndUpdate({ _id: id, is_deleted: false, status: { $in: from }, ...extra }, update as never, { returnDocument: 'before' })
      .lean<PaymentRecord>();
    if (!old) return null;
    const doc = applied(old, update);
    await this.audit(actor, old, doc);
    return { old, doc };
  }

  private async audit(actor: AuthUser, old: PaymentRecord, doc: PaymentRecord) {
    const tenantId = doc.tenant_id ? String(doc.tenant_id) : null;
    await this.deps.hooks.emitAfter('AFTER_UPDATE', {
      ...this.resource.event(actor, tenantId, false), id: String(doc._id), old: old as never, doc: doc as never, replace: false,
    });
  }

  private async current(id: Types.ObjectId): Promise<PaymentRecord> {
    const cur = await this.model.findById(id).lean<PaymentRecord>();
    if (!cur) throw new NotFoundError('payments', String(id));
    return cur;
  }

  private intentOf(p: PaymentRecord): PaymentIntent {
    return {
      payment_id: String(p._id), tenant_id: p.tenant_id ? String(p.tenant_id) : null, amount: p.amount, amount_minor: p.amount_minor,
      currency: p.currency, user_id: p.user_id, resource_type: p.resource_type, resource_id: p.resource_id,
      metadata: (p.metadata ?? {}) as Record<string, unknown>, idempotency_key: `payment-${String(p._id)}`,
    };
  }

  /**
   * `POST /payments/{id}/process`: asks the provider to accept the payment. pending → processing
   * (accepted), → completed as well when the provider captured inline, → failed when it declined.
   */
  async process(user: AuthUser, id: string): Promise<{ payment: PaymentView; provider_data: Record<string, unknown> }> {
    const p = await this.owned(user, id);
    if (p.status !== 'pending') throw transitionConflict(p.status, 'process', ['pending']);
    const provider = this.provider(p.provider);
    let result;
    try {
      result = await provider.create_payment(this.intentOf(p));
    } catch (err) {
      this.deps.log.warn({ err, provider: p.provider, payment_id: id }, 'create_payment failed');
      throw new ProviderError(p.provider, errorText(err));
    }
    const target = this.normalise(provider, result.status);
    if (!target) throw new ProviderError(p.provider, `unmapped status "${result.status}"`);
    const ref = result.provider_reference ?? p.provider_reference ?? null;
    let doc = p;
    if (target === 'failed') doc = await this.fail(user, p, result.failure_reason ?? `declined (${result.status})`);
    else if (target === 'cancelled') doc = await this.cancelDoc(user, p, null);
    else if (target !== 'pending') {
      const moved = await this.transition(user, p._id, ['pending'], { $set: { status: 'processing', provider_reference: ref } });
      if (!moved) throw transitionConflict((await this.current(p._id)).status, 'process', ['pending']);
      doc = moved.doc;
      if (target === 'completed') doc = await this.completeDoc(user, doc, ref ?? `${p.provider}_${id}`, result.receipt_url ?? null);
    }
    return { payment: this.view(doc), provider_data: result.client_data ?? {} };
  }

  /**
   * `POST /payments/{id}/complete`: processing → completed. Idempotent for the same
   * `provider_reference` (a repeat answers the payment as it is); another reference is 409.
   */
  async complete(user: AuthUser, id: string, input: CompleteInput): Promise<PaymentView> {
    const p = await this.owned(user, id);
    const provider = this.provider(p.provider);
    const target = this.normalise(provider, input.provider_status);
    if (target !== 'completed' && target !== 'failed') {
      throw new ValidationError([{ loc: ['body', 'provider_status'], msg: `"${input.provider_status}" does not mean completed or failed for provider ${p.provider}`, type: 'invalid_value' }]);
    }
    if (target === 'failed') return this.view(await this.fail(user, p, `declined (${input.provider_status})`));
    return this.view(await this.completeDoc(user, p, input.provider_reference, input.receipt_url ?? null));
  }

  private async completeDoc(actor: AuthUser, p: PaymentRecord, ref: string, receiptUrl: string | null): Promise<PaymentRecord> {
    const set: Record<string, unknown> = { status: 'completed', paid_at: new Date(), provider_reference: ref, refundable_minor: p.amount_minor };
    if (receiptUrl) set.receipt_url = receiptUrl;
    const moved = await this.transition(actor, p._id, ['processing'], { $set: set });
    if (moved) {
      await this.afterCompleted(actor, moved.doc);
      return moved.doc;
    }
    const cur = await this.current(p._id);
    const captured = ['completed', 'partially_refunded', 'refunded'].includes(cur.status);
    if (captured && cur.provider_reference === ref) return cur; // a retried completion (webhook redelivery): no-op
    if (captured) throw new ConflictError('The payment was completed with another provider_reference', { status: cur.status, operation: 'complete', provider_reference: cur.provider_reference });
    throw transitionConflict(cur.status, 'complete', ['processing']);
  }

  private async afterCompleted(actor: AuthUser, doc: PaymentRecord) {
    if (this.deps.ledger) await this.deps.ledger.postCapture(doc);
    await this.emit('PAYMENT_COMPLETED', { payment: this.view(doc), ...this.eventBase(actor, doc) });
  }

  private eventBase(actor: AuthUser, doc: PaymentRecord) {
    return { actor, tenant_id: doc.tenant_id ? String(doc.tenant_id) : null, request_id: requestOf(actor)?.requestId ?? null };
  }

  /** Domain events never fail the payment operation that already happened: a subscriber's error is logged. */
  private async emit<K extends 'PAYMENT_COMPLETED' | 'PAYMENT_REFUNDED'>(event: K, payload: HookEvents[K]) {
    try {
      await this.deps.hooks.dispatch(event, payload);
    } catch (err) {
      this.deps.log.error({ err, event }, 'payment event subscriber failed');
    }
  }

  /** pending or processing → failed (the provider declined). */
  private async fail(actor: AuthUser, p: PaymentRecord, reason: string): Promise<PaymentRecord> {
    const moved = await this.transition(actor, p._id, ['pending', 'processing'], { $set: { status: 'failed', failure_reason: reason } });
    if (moved) return moved.doc;
    const cur = await this.current(p._id);
    if (cur.status === 'failed') return cur;
    throw transitionConflict(cur.status, 'fail', ['pending', 'processing']);
  }

  /** `POST /payments/{id}/cancel`: pending → cancelled (terminal). */
  async cancel(user: AuthUser, id: string, reason: string | null): Promise<PaymentView> {
    return this.view(await this.cancelDoc(user, await this.owned(user, id), reason));
  }

  private async cancelDoc(actor: AuthUser, p: PaymentRecord, reason: string | null): Promise<PaymentRecord> {
    const moved = await this.transition(actor, p._id, ['pending'], { $set: { status: 'cancelled', cancelled_at: new Date(), ...(reason ? { failure_reason: reason } : {}) } });
    if (moved) return moved.doc;
    throw transitionConflict((await this.current(p._id)).status, 'cancel', ['pending']);
  }

  /**
   * `POST /payments/{id}/refund`: reserve the amount atomically on the payment, call the provider,
   * then apply the refund (or release the reservation when the provider fails).
   */
  async refund(user: AuthUser, id: string, input: RefundInput): Promise<PaymentView> {
    const p = await this.owned(user, id);
    const minor = toMinor(input.amount, p.currency);
    if (typeof minor === 'string') throw new ValidationError([{ loc: ['body', 'amount'], msg: minor, type: 'invalid_value' }]);
    if (!REFUNDABLE.includes(p.status)) throw transitionConflict(p.status, 'refund', REFUNDABLE);
    const provider = this.provider(p.provider);
    return this.view(await this.refundDoc(user, p, minor, input.reason ?? null, provider));
  }

  private async refundDoc(actor: AuthUser, p: PaymentRecord, minor: number, reason: string | null, provider: PaymentProvider | null): Promise<PaymentRecord> {
    const rid = new Types.ObjectId();
    const now = new Date();
    // The record first: a crash after the reservation then always leaves a record to reconcile.
    await this.deps.refunds.create({
      _id: rid, payment_id: p._id, tenant_id: p.tenant_id, amount: fromMinor(minor, p.currency), amount_minor: minor, currency: p.currency,
      reason, status: 'reserved', requested_by: this.actorId(actor), created_at: now, updated_at: now,
    });
    const reserved = await this.model
      .findOneAndUpdate(
        { _id: p._id, status: { $in: REFUNDABLE }, refundable_minor: { $gte: minor } },
        { $inc: { refundable_minor: -minor, refund_reserved_minor: minor }, $push: { open_refund_ids: String(rid) } },
        { returnDocument: 'after' },
      )
      .lean<PaymentRecord>();
    if (!reserved) {
      await this.deps.refunds.deleteOne({ _id: rid });
      const cur = await this.current(p._id);
      if (!REFUNDABLE.includes(cur.status)) throw transitionConflict(cur.status, 'refund', REFUNDABLE);
      throw new RefundExceedsCapturedError({
        requested: fromMinor(minor, cur.currency), refundable: fromMinor(cur.refundable_minor ?? 0, cur.currency),
        amount: cur.amount, refunded_amount: cur.refunded_amount, reserved: fromMinor(cur.refund_reserved_minor ?? 0, cur.currency),
      });
    }
    const providerRefundId = provider ? await this.refundAtProvider(provider, reserved, String(rid), minor, reason) : null;
    return this.applyRefund(actor, reserved, rid, minor, reason, providerRefundId);
  }

  /**
   * Asks the provider to refund `minor` of `p` under the refund id `rid` (its idempotency key, so a
   * repeated call refunds once) and answers the provider's refund id. When the provider is missing or
   * fails, the reservation is released (the refund record turns `failed`).
   * @throws ProviderError after releasing
   */
  private async refundAtProvider(provider: PaymentProvider | undefined, p: PaymentRecord, rid: string, minor: number, reason: string | null): Promise<string | null> {
    try {
      if (!provider) throw new Error(`provider ${p.provider} is not registered`);
      const res = await provider.refund_payment({
        payment_id: String(p._id), provider_reference: p.provider_reference ?? null, amount: fromMinor(minor, p.currency), amount_minor: minor,
        currency: p.currency, reason, idempotency_key: rid,
      });
      return res?.provider_refund_id ?? null;
    } catch (err) {
      await this.release(p._id, rid, minor, errorText(err));
      this.deps.log.warn({ err, provider: p.provider, payment_id: String(p._id), refund_id: rid }, 'refund_payment failed; reservation released');
      throw new ProviderError(p.provider, errorText(err));
    }
  }

  /** Gives a reserved amount back (the provider refused). Idempotent: only an open reservation is released. */
  private async release(paymentId: Types.ObjectId, rid: string, minor: number, error: string) {
    await this.model.updateOne(
      { _id: paymentId, open_refund_ids: rid },
      { $inc: { refundable_minor: minor, refund_reserved_minor: -minor }, $pull: { open_refund_ids: rid } },
    );
    await this.deps.refunds.updateOne({ _id: new Types.ObjectId(rid), status: 'reserved' }, { $set: { status: 'failed', error, updated_at: new Date() } });
  }

  /**
   * Moves a reserved refund into `refunded_minor`: compare-and-set on `refunded_minor` (the decimal
   * string and the status are derived from it in the same update), retried when another refund
   * landed first. Idempotent through `applied_refund_ids`. `payment` is the caller's latest copy; it
   * is read again only when the compare-and-set finds it out of date.
   */
  private async applyRefund(actor: AuthUser, payment: PaymentRecord, rid: Types.ObjectId, minor: number, reason: string | null, providerRefundId: string | null): Promise<PaymentRecord> {
    const key = String(rid);
    const paymentId = payment._id;
    for (let cur = payment; ; cur = await this.current(paymentId)) {
      if ((cur.applied_refund_ids ?? []).includes(key)) return cur;
      if (!(cur.open_refund_ids ?? []).includes(key)) throw new ConflictError('The refund reservation is gone', { refund_id: key });
      const total = cur.refunded_minor + minor;
      const status: PaymentStatus = total >= cur.amount_minor ? 'refunded' : 'partially_refunded';
      const moved = await this.transition(
        actor, paymentId, REFUNDABLE,
        {
          $set: { status, refunded_minor: total, refunded_amount: fromMinor(total, cur.currency), refunded_at: new Date(), refund_reason: reason ?? cur.refund_reason ?? null },
          $inc: { refund_reserved_minor: -minor },
          $pull: { open_refund_ids: key },
          $push: { applied_refund_ids: key },
        },
        { refunded_minor: cur.refunded_minor, open_refund_ids: key },
      );
      if (!moved) continue;
      await this.deps.refunds.updateOne({ _id: rid, status: 'reserved' }, { $set: { status: 'succeeded', provider_refund_id: providerRefundId, updated_at: new Date() } });
      const doc = moved.doc;
      if (this.deps.ledger) await this.deps.ledger.postRefund(doc, key, minor);
      await this.emit('PAYMENT_REFUNDED', {
        payment: this.view(doc),
        refund: { id: key, amount: fromMinor(minor, doc.currency), currency: doc.currency, reason, provider_refund_id: providerRefundId },
        ...this.eventBase(actor, doc),
      });
      return doc;
    }
  }

  /** `GET /payments/{id}/refunds`: the payment's refund attempts, oldest first. */
  async refundsOf(user: AuthUser, id: string) {
    const p = await this.owned(user, id);
    const rows = await this.deps.refunds.find({ payment_id: p._id }).sort({ created_at: 1, _id: 1 }).lean<RefundRecord[]>();
    return {
      items: rows.map((r) => ({
        id: String(r._id), payment_id: String(r.payment_id), amount: r.amount, currency: r.currency, reason: r.reason ?? null, status: r.status,
        provider_refund_id: r.provider_refund_id ?? null, error: r.error ?? null, created_at: r.created_at, updated_at: r.updated_at,
      })),
    };
  }

  /**
   * A verified webhook of provider `name` (run by the webhooks plugin, exactly once per event id).
   * Writes act as `systemActor(tenant of the payment)`, so audit records them as the system.
   * @throws when the payment is unknown, so the event is stored `failed` and the provider's redelivery (or a dead-letter retry) runs it again
   */
  async applyWebhook(name: string, payload: Record<string, unknown>, headers: Record<string, string>): Promise<void> {
    const provider = this.provider(name);
    const outcome = await provider.handle_webhook!(payload, headers);
    if (!outcome) return;
    const p = await this.findForWebhook(name, outcome);
    const actor = systemActor(p.tenant_id ? String(p.tenant_id) : null);
    if (outcome.kind === 'refund') {
      const known = p.refunded_minor + (p.refund_reserved_minor ?? 0);
      const extra = outcome.refunded_total_minor - known;
      // Our own refunds are already counted (applied or reserved); only a refund made at the provider directly is new.
      const applicable = Math.min(extra, p.refundable_minor ?? 0);
      if (applicable > 0 && REFUNDABLE.includes(p.status)) await this.refundDoc(actor, p, applicable, 'refunded at the provider', null);
      return;
    }
    const target = this.normalise(provider, outcome.status);
    if (!target) throw new Error(`unmapped ${name} status "${outcome.status}"`);
    if (target === 'failed') {
      if (p.status === 'pending' || p.status === 'processing') await this.fail(actor, p, outcome.failure_reason ?? `declined (${outcome.status})`);
      return;
    }
    if (target === 'cancelled') {
      if (p.status === 'pending') await this.cancelDoc(actor, p, 'cancelled at the provider');
      return;
    }
    let cur = p;
    if ((target === 'processing' || target === 'completed') && cur.status === 'pending') {
      const moved = await this.transition(actor, p._id, ['pending'], { $set: { status: 'processing', provider_reference: outcome.provider_reference ?? p.provider_reference ?? null } });
      cur = moved ? moved.doc : await this.current(p._id);
    }
    if (target === 'completed') {
      const ref = outcome.provider_reference ?? cur.provider_reference;
      if (!ref) throw new Error('completion without a provider reference');
      await this.completeDoc(actor, cur, ref, outcome.receipt_url ?? null);
    }
  }

  private async findForWebhook(name: string, o: WebhookOutcome): Promise<PaymentRecord> {
    let p: PaymentRecord | null = null;
    if (o.payment_id && /^[0-9a-fA-F]{24}$/.test(o.payment_id)) p = await this.model.findOne({ _id: new Types.ObjectId(o.payment_id), provider: name, is_deleted: false }).lean<PaymentRecord>();
    if (!p && o.provider_reference) p = await this.model.findOne({ provider: name, provider_reference: o.provider_reference, is_deleted: false }).lean<PaymentRecord>();
    if (!p) throw new Error(`no ${name} payment matches ${o.payment_id ?? o.provider_reference ?? '(no id)'}`);
    return p;
  }

  /**
   * Posts what a crash between a transition and its ledger posting left out: the capture of every
   * captured payment and every succeeded refund without their posting (posting is idempotent).
   */
  async reconcileLedger(): Promise<{ captures: number; refunds: number }> {
    const ledger = this.deps.ledger;
    const out = { captures: 0, refunds: 0 };
    if (!ledger) return out;
    const BATCH = 500;
    let page: PaymentRecord[] = [];
    const flushCaptures = async () => {
      const have = await ledger.existing(page.map((p) => `capture:${String(p._id)}`));
      for (const p of page) {
        if (have.has(`capture:${String(p._id)}`)) continue;
        await ledger.postCapture(p);
        out.captures++;
      }
      page = [];
    };
    for await (const p of this.model.find({ status: { $in: ['completed', 'partially_refunded', 'refunded'] }, is_deleted: false }).lean<PaymentRecord[]>().cursor()) {
      page.push(p as PaymentRecord);
      if (page.length >= BATCH) await flushCaptures();
    }
    await flushCaptures();
    let refunds: RefundRecord[] = [];
    const flushRefunds = async () => {
      const have = await ledger.existing(refunds.map((r) => `refund:${String(r._id)}`));
      for (const r of refunds) {
        if (have.has(`refund:${String(r._id)}`)) continue;
        await ledger.postRefund({ _id: r.payment_id, tenant_id: r.tenant_id ?? null, currency: r.currency } as PaymentRecord, String(r._id), r.amount_minor);
        out.refunds++;
      }
      refunds = [];
    };
    for await (const r of this.deps.refunds.find({ status: 'succeeded' }).lean<RefundRecord[]>().cursor()) {
      refunds.push(r as RefundRecord);
      if (refunds.length >= BATCH) await flushRefunds();
    }
    await flushRefunds();
    return out;
  }

  /**
   * Settles refunds left `reserved` by a crash (between the reservation and the provider's answer):
   * already applied → `succeeded`; reservation gone → `abandoned`; else the provider is asked again
   * with the same idempotency key (the refund id), then the refund is applied or released.
   */
  async reconcileRefunds(olderThanSeconds: number): Promise<{ examined: number; succeeded: number; released: number; abandoned: number }> {
    const out = { examined: 0, succeeded: 0, released: 0, abandoned: 0 };
    const cutoff = new Date(Date.now() - olderThanSeconds * 1000);
    const stuck = await this.deps.refunds.find({ status: 'reserved', created_at: { $lt: cutoff } }).lean<RefundRecord[]>();
    for (const r of stuck) {
      out.examined++;
      const p = await this.model.findById(r.payment_id).lean<PaymentRecord>();
      const key = String(r._id);
      if (p && (p.applied_refund_ids ?? []).includes(key)) {
        await this.deps.refunds.updateOne({ _id: r._id, status: 'reserved' }, { $set: { status: 'succeeded', updated_at: new Date() } });
        out.succeeded++;
        continue;
      }
      if (!p || !(p.open_refund_ids ?? []).includes(key)) {
        await this.deps.refunds.updateOne({ _id: r._id, status: 'reserved' }, { $set: { status: 'abandoned', updated_at: new Date() } });
        out.abandoned++;
        continue;
      }
      const actor = systemActor(p.tenant_id ? String(p.tenant_id) : null);
      let providerRefundId: string | null;
      try {
        providerRefundId = await this.refundAtProvider(this.registry.get(p.provider), p, key, r.amount_minor, r.reason ?? null);
      } catch {
        out.released++; // refundAtProvider released the reservation
        continue;
      }
      try {
        await this.applyRefund(actor, p, r._id, r.amount_minor, r.reason ?? null, providerRefundId);
        out.succeeded++;
      } catch (err) {
        await this.release(p._id, key, r.amount_minor, errorText(err));
        out.released++;
      }
    }
    return out;
  }
}
