/**
 * What a provider's verified webhook does to a payment. The webhooks plugin runs the handler
 * exactly once per event id; writes act as `systemActor(tenant of the payment)`, so audit records
 * them as the system. A thrown error stores the event `failed` (the provider's redelivery or a
 * dead-letter retry runs it again).
 */
import { Types } from 'mongoose';
import { systemActor } from '../../core/context.ts';
import type { PaymentRecord } from './model.ts';
import type { WebhookOutcome } from './providers.ts';
import type { PaymentStore } from './store.ts';
import type { PaymentLifecycle } from './lifecycle.ts';
import type { PaymentRefunds } from './refunds.ts';

export class ProviderWebhooks {
  constructor(
    private readonly store: PaymentStore,
    private readonly lifecycle: PaymentLifecycle,
    private readonly refunds: PaymentRefunds,
  ) {}

  /**
   * A verified webhook of provider `name`.
   * @throws when the payment is unknown, the provider's status is unmapped, or its refunded total is unusable
   */
  async apply(name: string, payload: Record<string, unknown>, headers: Record<string, string>): Promise<void> {
    const { providers } = this.store.deps;
    const provider = providers.get(name);
    const outcome = await provider.handle_webhook!(payload, headers);
    if (!outcome) return;
    const p = await this.find(name, outcome);
    const actor = systemActor(p.tenant_id ? String(p.tenant_id) : null);
    if (outcome.kind === 'refund') return this.refunds.applyProviderTotal(actor, p, outcome.refunded_total_minor);
    const target = providers.normalise(provider, outcome.status);
    if (!target) throw new Error(`unmapped ${name} status "${outcome.status}"`);
    if (target === 'failed') {
      if (p.status === 'pending' || p.status === 'processing') await this.lifecycle.fail(actor, p, outcome.failure_reason ?? `declined (${outcome.status})`);
      return;
    }
    if (target === 'cancelled') {
      if (p.status === 'pending') await this.lifecycle.cancelDoc(actor, p, 'cancelled at the provider');
      return;
    }
    let cur = p;
    if ((target === 'processing' || target === 'completed') && cur.status === 'pending') {
      cur = await this.lifecycle.toProcessing(actor, p, outcome.provider_reference ?? p.provider_reference ?? null);
    }
    if (target === 'completed') {
      const ref = outcome.provider_reference ?? cur.provider_reference;
      if (!ref) throw new Error('completion without a provider reference');
      await this.lifecycle.completeDoc(actor, cur, ref, outcome.receipt_url ?? null);
    }
  }

  /** The payment of provider `name` the outcome names: by our id, else by the provider's reference. */
  private async find(name: string, o: WebhookOutcome): Promise<PaymentRecord> {
    const { model } = this.store;
    let p: PaymentRecord | null = null;
    if (o.payment_id && /^[0-9a-fA-F]{24}$/.test(o.payment_id)) p = await model.findOne({ _id: new Types.ObjectId(o.payment_id), provider: name, is_deleted: false }).lean<PaymentRecord>();
    if (!p && o.provider_reference) p = await model.findOne({ provider: name, provider_reference: o.provider_reference, is_deleted: false }).lean<PaymentRecord>();
    if (!p) throw new Error(`no ${name} payment matches ${o.payment_id ?? o.provider_reference ?? '(no id)'}`);
    return p;
  }
}
