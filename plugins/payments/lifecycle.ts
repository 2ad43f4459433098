/**
 * The Payment lifecycle: pending → processing → completed, pending → cancelled, pending or
 * processing → failed. Every transition is one conditional update on the current status (see
 * `PaymentStore.transition`), so concurrent callers never leave an impossible state.
 */
import { ConflictError, ValidationError } from '../../core/errors.ts';
import type { Actor } from '../../core/context.ts';
import type { PaymentRecord } from './model.ts';
import type { PaymentIntent } from './providers.ts';
import type { CompleteInput } from './schemas.ts';
import type { PaymentStore, PaymentView } from './store.ts';
import { ProviderError, errorText, transitionConflict } from './errors.ts';

/** The states a captured payment can be in. */
const CAPTURED = ['completed', 'partially_refunded', 'refunded'];

export class PaymentLifecycle {
  constructor(private readonly store: PaymentStore) {}

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
  async process(actor: Actor, id: string): Promise<{ payment: PaymentView; provider_data: Record<string, unknown> }> {
    const { store } = this;
    const p = await store.owned(actor, id);
    if (p.status !== 'pending') throw transitionConflict(p.status, 'process', ['pending']);
    const provider = store.deps.providers.get(p.provider);
    let result;
    try {
      result = await provider.create_payment(this.intentOf(p));
    } catch (err) {
      store.deps.log.warn({ err, provider: p.provider, payment_id: id }, 'create_payment failed');
      throw new ProviderError(p.provider, errorText(err));
    }
    const target = store.deps.providers.normalise(provider, result.status);
    if (!target) throw new ProviderError(p.provider, `unmapped status "${result.status}"`);
    const ref = result.provider_reference ?? p.provider_reference ?? null;
    let doc = p;
    if (target === 'failed') doc = await this.fail(actor, p, result.failure_reason ?? `declined (${result.status})`);
    else if (target === 'cancelled') doc = await this.cancelDoc(actor, p, null);
    else if (target !== 'pending') {
      const moved = await store.transition(actor, p._id, ['pending'], { $set: { status: 'processing', provider_reference: ref } });
      if (!moved) throw transitionConflict((await store.current(p._id)).status, 'process', ['pending']);
      doc = moved.doc;
      if (target === 'completed') doc = await this.completeDoc(actor, doc, ref ?? `${p.provider}_${id}`, result.receipt_url ?? null);
    }
    return { payment: store.view(doc), provider_data: result.client_data ?? {} };
  }

  /**
   * `POST /payments/{id}/complete`: processing → completed. Idempotent for the same
   * `provider_reference` (a repeat answers the payment as it is); another reference is 409.
   */
  async complete(actor: Actor, id: string, input: CompleteInput): Promise<PaymentView> {
    const { store } = this;
    const p = await store.owned(actor, id);
    const provider = store.deps.providers.get(p.provider);
    const target = store.deps.providers.normalise(provider, input.provider_status);
    if (target !== 'completed' && target !== 'failed') {
      throw new ValidationError([{ loc: ['body', 'provider_status'], msg: `"${input.provider_status}" does not mean completed or failed for provider ${p.provider}`, type: 'invalid_value' }]);
    }
    if (target === 'failed') return store.view(await this.fail(actor, p, `declined (${input.provider_status})`));
    return store.view(await this.completeDoc(actor, p, input.provider_reference, input.receipt_url ?? null));
  }

  /** processing → completed with the capture's reference; a repeat with the same reference is a no-op. */
  async completeDoc(actor: Actor, p: PaymentRecord, ref: string, receiptUrl: string | null): Promise<PaymentRecord> {
    const { store } = this;
    const set: Record<string, unknown> = { status: 'completed', paid_at: new Date(), provider_reference: ref, refundable_minor: p.amount_minor };
    if (receiptUrl) set.receipt_url = receiptUrl;
    const moved = await store.transition(actor, p._id, ['processing'], { $set: set });
    if (moved) {
      if (store.deps.ledger) await store.deps.ledger.postCapture(moved.doc);
      await store.emit('PAYMENT_COMPLETED', { payment: store.view(moved.doc), ...store.eventBase(actor, moved.doc) });
      return moved.doc;
    }
    const cur = await store.current(p._id);
    const captured = CAPTURED.includes(cur.status);
    if (captured && cur.provider_reference === ref) return cur; // a retried completion (webhook redelivery): no-op
    if (captured) throw new ConflictError('The payment was completed with another provider_reference', { status: cur.status, operation: 'complete', provider_reference: cur.provider_reference });
    throw transitionConflict(cur.status, 'complete', ['processing']);
  }

  /** pending or processing → failed (the provider declined). */
  async fail(actor: Actor, p: PaymentRecord, reason: string): Promise<PaymentRecord> {
    const moved = await this.store.transition(actor, p._id, ['pending', 'processing'], { $set: { status: 'failed', failure_reason: reason } });
    if (moved) return moved.doc;
    const cur = await this.store.current(p._id);
    if (cur.status === 'failed') return cur;
    throw transitionConflict(cur.status, 'fail', ['pending', 'processing']);
  }

  /** `POST /payments/{id}/cancel`: pending → cancelled (terminal). */
  async cancel(actor: Actor, id: string, reason: string | null): Promise<PaymentView> {
    return this.store.view(await this.cancelDoc(actor, await this.store.owned(actor, id), reason));
  }

  async cancelDoc(actor: Actor, p: PaymentRecord, reason: string | null): Promise<PaymentRecord> {
    const moved = await this.store.transition(actor, p._id, ['pending'], { $set: { status: 'cancelled', cancelled_at: new Date(), ...(reason ? { failure_reason: reason } : {}) } });
    if (moved) return moved.doc;
    throw transitionConflict((await this.store.current(p._id)).status, 'cancel', ['pending']);
  }

  /** pending → processing with the provider's reference (a webhook saw the payment at the provider); the payment as it is now. */
  async toProcessing(actor: Actor, p: PaymentRecord, ref: string | null): Promise<PaymentRecord> {
    const moved = await this.store.transition(actor, p._id, ['pending'], { $set: { status: 'processing', provider_reference: ref } });
    return moved ? moved.doc : this.store.current(p._id);
  }
}
