/**
 * Double-entry bookkeeping (on with `PAYMENTS_LEDGER_ENABLED`). A completion posts
 * debit `provider_clearing` / credit `sales`; a refund posts the reverse for the refunded amount.
 * Each posting is keyed (`capture:<payment>`, `refund:<refund>`) under a unique index, so posting
 * again (a retry, a reconciliation) adds nothing.
 */
import { Types } from 'mongoose';
import type { Actor } from '../../core/context.ts';
import type { Filter } from '../../core/access.ts';
import type { Permissions } from '../../core/permissions.ts';
import { pageOf, type Page } from '../../lib/page.ts';
import type { Tenancy } from '../../core/tenancy.ts';
import { fromMinor } from './money.ts';
import type { LedgerEntryRecord, LedgerEntryView, PaymentRecord, ledgerModel } from './model.ts';
import type { LedgerQuery } from './schemas.ts';

type LedgerModel = ReturnType<typeof ledgerModel>;

/** One row of `GET /ledger/balance`: debits, credits and their difference (`balance`) as decimal strings. */
export type BalanceRow = Pick<LedgerEntryView, 'tenant_id' | 'account' | 'currency'> & { debit: string; credit: string; balance: string };

const view = (e: LedgerEntryRecord): LedgerEntryView => ({
  id: String(e._id), tenant_id: e.tenant_id ? String(e.tenant_id) : null, transaction_id: e.transaction_id, entry_type: e.entry_type,
  payment_id: String(e.payment_id), account: e.account, direction: e.direction, amount: e.amount, currency: e.currency, created_at: e.created_at,
});

/**
 * Postings and the administrators' reads. Reads are confined to the actor's tenant when
 * `MULTI_TENANT_ENABLED` is on (through `Tenancy`), like every other tenant-scoped read.
 */
/** Who may call each ledger operation: the one declaration its REST route and GraphQL field both read. */
export const LEDGER_PERMISSIONS = { entries: 'admin', balance: 'admin' } as const satisfies Permissions;

export class LedgerService {
  constructor(
    private readonly model: LedgerModel,
    private readonly tenancy: Tenancy,
  ) {}

  postCapture(p: PaymentRecord): Promise<void> {
    return this.post(`capture:${String(p._id)}`, 'capture', p, p.amount_minor, 'provider_clearing', 'sales');
  }

  postRefund(p: PaymentRecord, refundId: string, minor: number): Promise<void> {
    return this.post(`refund:${refundId}`, 'refund', p, minor, 'sales', 'provider_clearing');
  }

  private async post(transactionId: string, type: 'capture' | 'refund', p: PaymentRecord, minor: number, debit: string, credit: string) {
    const now = new Date();
    const base = { tenant_id: p.tenant_id, transaction_id: transactionId, entry_type: type, payment_id: p._id, amount: fromMinor(minor, p.currency), amount_minor: minor, currency: p.currency, created_at: now };
    try {
      await this.model.insertMany([{ ...base, account: debit, direction: 'debit' }, { ...base, account: credit, direction: 'credit' }], { ordered: false });
    } catch (err) {
      // Already posted (both lines or one of them): the unique key made the repeat a no-op.
      const e = err as { code?: number; writeErrors?: { code?: number; err?: { code?: number } }[] };
      const dupOnly = e.code === 11000 || (e.writeErrors?.length && e.writeErrors.every((w) => (w.code ?? w.err?.code) === 11000));
      if (!dupOnly) throw err;
    }
  }

  /** Which of these postings exist. */
  async existing(transactionIds: string[]): Promise<Set<string>> {
    const rows = await this.model.find({ transaction_id: { $in: transactionIds } }).select({ transaction_id: 1 }).lean<{ transaction_id: string }[]>();
    return new Set(rows.map((r) => r.transaction_id));
  }

  /** `GET /ledger/entries`, newest first (permission: {@link LEDGER_PERMISSIONS}). */
  async entries(actor: Actor, q: LedgerQuery): Promise<Page<LedgerEntryView>> {
    const filter: Filter = this.tenancy.filter(actor);
    if (q.payment_id) filter.payment_id = new Types.ObjectId(q.payment_id);
    if (q.account) filter.account = q.account;
    if (q.currency) filter.currency = q.currency;
    const [rows, total] = await Promise.all([
      this.model.find(filter).sort({ created_at: -1, _id: -1 }).skip((q.page - 1) * q.per_page).limit(q.per_page).lean<LedgerEntryRecord[]>(),
      this.model.countDocuments(filter),
    ]);
    return pageOf(rows.map(view), total, q);
  }

  /**
   * Per tenant, account and currency: debits, credits and their difference, summed exactly in minor
   * units (permission: {@link LEDGER_PERMISSIONS}).
   */
  async balance(actor: Actor): Promise<{ items: BalanceRow[]; balanced: boolean }> {
    const scope = this.tenancy.filter(actor);
    const rows = await this.model.aggregate<{ _id: Pick<LedgerEntryRecord, 'tenant_id' | 'account' | 'currency'>; debit: number; credit: number }>([
      // Aggregation does not cast: the filter's ObjectId matches the stored ObjectId as it is.
      { $match: scope },
      {
        $group: {
          _id: { tenant_id: '$tenant_id', account: '$account', currency: '$currency' },
          debit: { $sum: { $cond: [{ $eq: ['$direction', 'debit'] }, '$amount_minor', 0] } },
          credit: { $sum: { $cond: [{ $eq: ['$direction', 'credit'] }, '$amount_minor', 0] } },
        },
      },
      { $sort: { '_id.tenant_id': 1, '_id.currency': 1, '_id.account': 1 } },
    ]);
    const perCurrency = new Map<string, number>();
    const items = rows.map((r): BalanceRow => {
      const k = `${String(r._id.tenant_id)}:${r._id.currency}`;
      perCurrency.set(k, (perCurrency.get(k) ?? 0) + r.debit - r.credit);
      return {
        tenant_id: r._id.tenant_id ? String(r._id.tenant_id) : null, account: r._id.account, currency: r._id.currency,
        debit: fromMinor(r.debit, r._id.currency), credit: fromMinor(r.credit, r._id.currency), balance: fromMinor(r.debit - r.credit, r._id.currency),
      };
    });
    return { items, balanced: [...perCurrency.values()].every((v) => v === 0) };
  }
}
