/**
 * Payout batches: settlement builds drafts from completed payments, `approve_payout`,
 * `process_payout`, `fail_payout` and `execute_payout` move them on. Every state change is one
 * conditional update. Every operation is for system administrators (and the system actor).
 */
import { Types, type Model } from 'mongoose';
import { AccessDeniedError, ConflictError, NotFoundError } from '../../core/errors.ts';
import { isSystemActor, type Actor } from '../../core/context.ts';
import { OUTBOX_FIELD } from '../events/public/outbox.ts';
import type { EventLog } from '../events/index.ts';
import type { Filter } from '../../core/access.ts';
import type { Permissions } from '../../core/permissions.ts';
import { pageOf, type Page } from '../../lib/page.ts';
import type { Tenancy } from '../../core/tenancy.ts';
import type { ResourceService } from '../resources/index.ts';
import { compareToMinor, fromMinor, percentOf } from './money.ts';
import { stagePaymentChange } from './store.ts';
import type { PaymentRecord, PayoutRecord, PayoutStatus, PayoutView, payoutModel } from './model.ts';
import type { PayoutListQuery, SettleParams } from './schemas.ts';

type PayoutModel = ReturnType<typeof payoutModel>;

export const payoutView = (b: PayoutRecord): PayoutView => ({
  id: String(b._id), recipient_type: b.recipient_type, recipient_id: b.recipient_id, tenant_id: b.tenant_id ? String(b.tenant_id) : null,
  gross_amount: b.gross_amount, fee_amount: b.fee_amount, net_amount: b.net_amount, currency: b.currency,
  period_start: b.period_start, period_end: b.period_end, status: b.status as PayoutStatus, payment_count: b.payment_count,
  payment_ids: (b.payment_ids ?? []).map(String), bank_reference: b.bank_reference ?? null, paid_at: b.paid_at ?? null,
  failure_reason: b.failure_reason ?? null, auto_approved: !!b.auto_approved, created_by: b.created_by ? String(b.created_by) : null, approved_by: b.approved_by ? String(b.approved_by) : null,
  approved_at: b.approved_at ?? null, created_at: b.created_at, updated_at: b.updated_at,
});

/** A batch whose settlement run has not finished after this long is finished by the next run. */
const STALE_BUILD_MS = 10 * 60_000;
const SETTLED_STATUSES = ['completed', 'partially_refunded', 'refunded'];

export interface PayoutOptions {
  /** `PAYOUT_FEE_PERCENT`. */
  feePercent: string;
  /** `PAYOUT_AUTO_APPROVE_THRESHOLD`. */
  autoApproveThreshold: string;
}

export interface PayoutsDeps {
  model: PayoutModel;
  /** The `payments` resource: settlement claims its documents (audited like every Payment write). */
  payments: ResourceService;
  tenancy: Tenancy;
  /** The event log (kernel service): a claim stores its event in the payment's outbox. */
  events: Pick<EventLog, 'outbox' | 'stage' | 'committed'>;
}

/** Compare-and-set attempts of one claim against concurrent writers of the payment. */
const MAX_CLAIM_ATTEMPTS = 10;

/**
 * Who may call each payout operation (system administrators, and the settlement job's system
 * actor): the one declaration the REST routes and GraphQL fields read.
 */
export const PAYOUT_PERMISSIONS = { list: 'system', get: 'system', approve: 'system', process: 'system', fail: 'system', execute: 'system', settle: 'system' } as const satisfies Permissions;

export class PayoutsService {
  private readonly model: PayoutModel;

  constructor(
    private readonly deps: PayoutsDeps,
    private readonly opts: PayoutOptions,
  ) {
    this.model = deps.model;
  }

  private get paymentModel(): Model<PaymentRecord> {
    return this.deps.payments.model as unknown as Model<PaymentRecord>;
  }

  private oid(id: string): Types.ObjectId {
    if (!/^[0-9a-fA-F]{24}$/.test(id)) throw new NotFoundError('payouts', id);
    return new Types.ObjectId(id);
  }

  async list(actor: Actor, q: PayoutListQuery): Promise<Page<PayoutView>> {
    const filter: Filter = this.deps.tenancy.filter(actor);
    if (q.status) filter.status = q.status;
    // A caller confined to one tenant asking for another gets an empty page, never another tenant's batches.
    if (q.tenant_id) filter.tenant_id = filter.tenant_id && String(filter.tenant_id) !== q.tenant_id ? { $in: [] } : new Types.ObjectId(q.tenant_id);
    const [rows, total] = await Promise.all([
      this.model.find(filter).sort({ created_at: -1, _id: -1 }).skip((q.page - 1) * q.per_page).limit(q.per_page).lean<PayoutRecord[]>(),
      this.model.countDocuments(filter),
    ]);
    return pageOf(rows.map(payoutView), total, q);
  }

  async get(actor: Actor, id: string): Promise<PayoutView> {
    return payoutView(await this.owned(actor, id));
  }

  /** True when `net` is below the auto-approve threshold (a threshold of 0 approves nothing). */
  private belowThreshold(b: Pick<PayoutRecord, 'net_minor' | 'currency'>): boolean {
    return compareToMinor(this.opts.autoApproveThreshold, b.net_minor, b.currency) > 0;
  }

  /**
   * `approve_payout`: draft → approved. Above the threshold only a person may approve, and never
   * the batch's creator; the settlement runner (system actor) approves only batches below it.
   */
  async approve(actor: Actor, id: string): Promise<PayoutView> {
    const b = await this.owned(actor, id);
    if (b.status !== 'draft' || b.building) throw new ConflictError(`Cannot approve a payout that is ${b.building ? 'still being built' : b.status}`, { status: b.status, operation: 'approve', allowed_from: ['draft'] });
    const system = isSystemActor(actor);
    if (system && !this.belowThreshold(b)) throw new AccessDeniedError('This payout is above the auto-approve threshold: a person must approve it', { threshold: this.opts.autoApproveThreshold });
    if (!system && b.created_by && String(b.created_by) === actor.id) throw new AccessDeniedError('The creator of a payout cannot approve it', { created_by: String(b.created_by) });
    const now = new Date();
    const done = await this.model
      .findOneAndUpdate(
        { _id: b._id, status: 'draft', building: false },
        { $set: { status: 'approved', approved_by: system ? null : new Types.ObjectId(actor.id), approved_at: now, auto_approved: system, updated_at: now } },
        { returnDocument: 'after' },
      )
      .lean<PayoutRecord>();
    if (!done) throw await this.conflict(b._id, 'approve', ['draft']);
    return payoutView(done);
  }

  /**
   * `process_payout`: approved → processing (the transfer was handed to the bank), or failed →
   * processing (a retry of a failed transfer; `failure_reason` is cleared). Nothing else
   * moves a batch to `processing`. Repeating it on a processing batch is a no-op.
   */
  async process(actor: Actor, id: string): Promise<PayoutView> {
    const b = await this.owned(actor, id);
    const now = new Date();
    const done = await this.model
      .findOneAndUpdate({ _id: b._id, status: { $in: ['approved', 'failed'] } }, { $set: { status: 'processing', failure_reason: null, updated_at: now } }, { returnDocument: 'after' })
      .lean<PayoutRecord>();
    if (done) return payoutView(done);
    const cur = await this.model.findById(b._id).lean<PayoutRecord>();
    if (cur?.status === 'processing') return payoutView(cur);
    throw await this.conflict(b._id, 'process', ['approved', 'failed']);
  }

  /**
   * `fail_payout`: processing → failed with `failure_reason` (the bank rejected the transfer). The
   * batch keeps its payments, so none can be paid out twice; `process_payout` retries it.
   */
  async fail(actor: Actor, id: string, reason: string): Promise<PayoutView> {
    const b = await this.owned(actor, id);
    const now = new Date();
    const done = await this.model
      .findOneAndUpdate({ _id: b._id, status: 'processing' }, { $set: { status: 'failed', failure_reason: reason, updated_at: now } }, { returnDocument: 'after' })
      .lean<PayoutRecord>();
    if (done) return payoutView(done);
    throw await this.conflict(b._id, 'fail', ['processing']);
  }

  /**
   * `execute_payout`: approved (or processing) → completed with `bank_reference` and `paid_at`.
   * Repeating it with the same reference is a no-op; another reference is 409.
   */
  async execute(actor: Actor, id: string, bankReference: string): Promise<PayoutView> {
    const { _id } = await this.owned(actor, id);
    const now = new Date();
    const done = await this.model
      .findOneAndUpdate(
        { _id, status: { $in: ['approved', 'processing'] } },
        { $set: { status: 'completed', bank_reference: bankReference, paid_at: now, failure_reason: null, updated_at: now } },
        { returnDocument: 'after' },
      )
      .lean<PayoutRecord>();
    if (done) return payoutView(done);
    const cur = await this.model.findById(_id).lean<PayoutRecord>();
    if (cur?.status === 'completed' && cur.bank_reference === bankReference) return payoutView(cur);
    throw await this.conflict(_id, 'execute', ['approved', 'processing']);
  }

  /** The batch, if the actor's tenant scope reaches it (404 otherwise). */
  private async owned(actor: Actor, id: string): Promise<PayoutRecord> {
    const b = await this.model.findOne({ _id: this.oid(id), ...this.deps.tenancy.filter(actor) }).lean<PayoutRecord>();
    if (!b) throw new NotFoundError('payouts', id);
    return b;
  }

  private async conflict(id: Types.ObjectId, operation: string, from: string[]) {
    const cur = await this.model.findById(id).lean<PayoutRecord>();
    return new ConflictError(`Cannot ${operation} a payout that is ${cur?.status ?? 'gone'}`, { status: cur?.status ?? null, operation, allowed_from: from });
  }

  /**
   * Settlement: one draft batch per tenant and currency for the period, from completed payments
   * not yet in a batch, less refunds and the payout fee. Each payment is claimed by one atomic
   * conditional update (`payout_batch_id: null`), so concurrent runs split payments between their
   * batches and none lands in two. Batches below the threshold are approved at once.
   */
  async settle(actor: Actor, params: SettleParams): Promise<{ period_start: Date; period_end: Date; batches: PayoutView[]; payment_count: number }> {
    const today = new Date();
    today.setUTCHours(0, 0, 0, 0);
    const end = params.period_end ? new Date(params.period_end) : today;
    const start = params.period_start ? new Date(params.period_start) : new Date(end.getTime() - 86_400_000);
    await this.finishStale();
    const scope = this.deps.tenancy.scope(actor);
    // An actor confined to one tenant settles that tenant only.
    if (scope && params.tenant_id && params.tenant_id !== scope) throw new AccessDeniedError('The caller acts in another tenant', { tenant_id: params.tenant_id });
    const tenant = scope ?? params.tenant_id;
    const match: Record<string, unknown> = {
      status: { $in: SETTLED_STATUSES }, is_deleted: false, payout_batch_id: null, refund_reserved_minor: 0, paid_at: { $gte: start, $lt: end },
      ...(tenant ? { tenant_id: new Types.ObjectId(tenant) } : {}),
    };
    const groups = await this.paymentModel.aggregate<{ _id: { tenant_id: Types.ObjectId; currency: string } }>([{ $match: match }, { $group: { _id: { tenant_id: '$tenant_id', currency: '$currency' } } }]);
    const batches: PayoutView[] = [];
    let count = 0;
    for (const g of groups) {
      const now = new Date();
      const created = await this.model.create({
        recipient_type: 'tenant', recipient_id: String(g._id.tenant_id), tenant_id: g._id.tenant_id, currency: g._id.currency,
        gross_amount: '0', fee_amount: '0', net_amount: '0', gross_minor: 0, fee_minor: 0, net_minor: 0,
        period_start: start, period_end: end, status: 'draft', payment_count: 0, payment_ids: [], building: true,
        created_by: isSystemActor(actor) ? null : new Types.ObjectId(actor.id), created_at: now, updated_at: now,
      });
      const candidates = await this.paymentModel.find({ ...match, tenant_id: g._id.tenant_id, currency: g._id.currency }).select({ _id: 1 }).lean<{ _id: Types.ObjectId }[]>();
      for (const c of candidates) await this.claim(actor, c._id, created._id, match);
      const b = await this.finish(created._id);
      if (!b) continue;
      count += b.payment_count;
      batches.push(payoutView(b.status === 'draft' && this.belowThreshold(b) ? await this.autoApprove(b) : b));
    }
    return { period_start: start, period_end: end, batches, payment_count: count };
  }

  /**
   * One payment into one batch: a compare-and-set on its `version` and `payout_batch_id: null`
   * that stores its `payments.updated` event (with its audit entry) in the payment's outbox, like
   * every Payment write, and freezes the object of an event still waiting there (docs/events.md).
   */
  private async claim(actor: Actor, paymentId: Types.ObjectId, batchId: Types.ObjectId, match: Record<string, unknown>) {
    const { events, payments } = this.deps;
    for (let attempt = 0; attempt < MAX_CLAIM_ATTEMPTS; attempt++) {
      const cur = await this.paymentModel.findOne({ ...match, _id: paymentId }).lean<PaymentRecord & Record<string, unknown>>();
      if (!cur) return; // not claimable (another batch has it, or it left the period's states)
      const entry = stagePaymentChange(events, payments, 'payments.updated', actor, cur, { bulk: true });
      const set: Record<string, unknown> = {
        payout_batch_id: batchId, updated_at: new Date(), updated_by: isSystemActor(actor) ? null : new Types.ObjectId(actor.id),
        [OUTBOX_FIELD]: events.outbox.update(payments.source, cur, entry),
      };
      const old = await this.paymentModel.findOneAndUpdate({ ...match, _id: paymentId, version: cur.version }, { $set: set, $inc: { version: 1 } }, { returnDocument: 'before' }).lean<PaymentRecord>();
      if (!old) continue;
      await events.committed(payments.source, { ...old, ...set, version: old.version + 1 } as never);
      return;
    }
  }

  /** Totals from the payments the batch claimed; an empty batch is removed. */
  private async finish(batchId: Types.ObjectId): Promise<PayoutRecord | null> {
    const claimed = await this.paymentModel.find({ payout_batch_id: batchId }).select({ amount_minor: 1, refunded_minor: 1, currency: 1 }).lean<PaymentRecord[]>();
    if (!claimed.length) {
      await this.model.deleteOne({ _id: batchId, building: true });
      return null;
    }
    const currency = claimed[0]!.currency;
    const gross = claimed.reduce((n, p) => n + p.amount_minor - p.refunded_minor, 0);
    const fee = Math.min(gross, percentOf(gross, this.opts.feePercent));
    const net = gross - fee;
    return this.model
      .findOneAndUpdate(
        { _id: batchId, building: true },
        {
          $set: {
            gross_minor: gross, fee_minor: fee, net_minor: net, gross_amount: fromMinor(gross, currency), fee_amount: fromMinor(fee, currency), net_amount: fromMinor(net, currency),
            payment_count: claimed.length, payment_ids: claimed.map((p) => p._id), building: false, updated_at: new Date(),
          },
        },
        { returnDocument: 'after' },
      )
      .lean<PayoutRecord>();
  }

  private async autoApprove(b: PayoutRecord): Promise<PayoutRecord> {
    const now = new Date();
    const done = await this.model
      .findOneAndUpdate({ _id: b._id, status: 'draft', building: false }, { $set: { status: 'approved', auto_approved: true, approved_at: now, updated_at: now } }, { returnDocument: 'after' })
      .lean<PayoutRecord>();
    return done ?? b;
  }

  /** Batches left `building` by a crashed run: their claimed payments are totalled now. */
  private async finishStale() {
    const stale = await this.model.find({ building: true, created_at: { $lt: new Date(Date.now() - STALE_BUILD_MS) } }).select({ _id: 1 }).lean<{ _id: Types.ObjectId }[]>();
    for (const s of stale) await this.finish(s._id);
  }
}
