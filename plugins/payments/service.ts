/**
 * The payments service (`services.get('payments')`): the provider registry, and once payments are
 * enabled the Payment lifecycle, refunds, provider webhooks, reconcilers and payouts, each in its
 * own module. No Koa or GraphQL here.
 */
import { ConflictError } from '../../core/errors.ts';
import type { Actor } from '../../core/context.ts';
import { permit, type Permissions } from '../../core/permissions.ts';
import type { HookBus } from '../../core/hooks.ts';
import type { Logger } from '../../core/logger.ts';
import type { EventLog } from '../events/index.ts';
import type { ResourceService } from '../resources/index.ts';
import type { WebhookRegistry } from '../webhooks/index.ts';
import type { PaymentProvider } from './providers.ts';
import type { PayoutView, refundModel } from './model.ts';
import type { CompleteInput, RefundInput } from './schemas.ts';
import type { LedgerService } from './ledger.ts';
import { PAYOUT_PERMISSIONS, type PayoutsService } from './payouts.ts';
import { ProviderRegistry } from './registry.ts';
import { PaymentStore, type PaymentView } from './store.ts';
import { PaymentLifecycle } from './lifecycle.ts';
import { PaymentRefunds } from './refunds.ts';
import { ProviderWebhooks } from './provider-webhooks.ts';
import { PaymentReconciler } from './reconcile.ts';

export type { PaymentView } from './store.ts';
export { ProviderError, RefundExceedsCapturedError, transitionConflict } from './errors.ts';

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
   * `approve_payout(payout_id)`, as `actor` (the same rules as `POST /payouts/{id}/approve`).
   * @throws ConflictError when payments are not enabled (`PAYMENTS_ENABLED`)
   */
  approve_payout(actor: Actor, payoutId: string): Promise<PayoutView>;
  /** `execute_payout(payout_id, bank_reference)`, as `actor` (same rules as `POST /payouts/{id}/execute`). */
  execute_payout(actor: Actor, payoutId: string, bankReference: string): Promise<PayoutView>;
  /** approved (or failed, to retry) → processing: the transfer was handed to the bank (`POST /payouts/{id}/process`). */
  process_payout(actor: Actor, payoutId: string): Promise<PayoutView>;
  /** processing → failed with a reason: the bank rejected the transfer (`POST /payouts/{id}/fail`). */
  fail_payout(actor: Actor, payoutId: string, reason: string): Promise<PayoutView>;
}

export interface PaymentsServiceDeps {
  hooks: HookBus;
  log: Logger;
  refunds: ReturnType<typeof refundModel>;
  webhooks: WebhookRegistry;
  ledger: LedgerService | null;
  /** The event log (kernel service): transitions store `payment.<status>` events with their write. */
  events: EventLog;
}

/** The modules that exist once the `payments` resource is registered. */
interface Enabled {
  store: PaymentStore;
  lifecycle: PaymentLifecycle;
  refunds: PaymentRefunds;
  webhooks: ProviderWebhooks;
  reconciler: PaymentReconciler;
  payouts: PayoutsService;
}

/**
 * Who may call each payment operation: the one declaration its REST route and GraphQL field read
 * (docs/auth.md, "Permissions"). Which payment a caller reaches is the resource's rule (tenant scope).
 */
export const PAYMENT_PERMISSIONS = { update: 'user', process: 'user', complete: 'admin', cancel: 'user', refundsOf: 'user', refund: 'admin' } as const satisfies Permissions;

export class PaymentsService implements PaymentsApi {
  private readonly registry = new ProviderRegistry();
  private enabled: Enabled | null = null;

  constructor(private readonly deps: PaymentsServiceDeps) {}

  /** Builds the payment modules on the registered `payments` resource (`PAYMENTS_ENABLED`). */
  attach(resource: ResourceService, payouts: PayoutsService): void {
    const { hooks, log, refunds, ledger, events } = this.deps;
    const store = new PaymentStore({ hooks, log, resource, providers: this.registry, refunds, ledger, events });
    const lifecycle = new PaymentLifecycle(store);
    const refundService = new PaymentRefunds(store);
    this.enabled = {
      store, lifecycle, refunds: refundService, payouts,
      webhooks: new ProviderWebhooks(store, lifecycle, refundService),
      reconciler: new PaymentReconciler(store, refundService),
    };
  }

  private get on(): Enabled {
    if (!this.enabled) throw new ConflictError('Payments are not enabled on this server (PAYMENTS_ENABLED)');
    return this.enabled;
  }

  registerProvider(p: PaymentProvider): void {
    this.registry.check(p);
    if (p.webhook) {
      this.deps.webhooks.register({ ...p.webhook, provider: p.name, handler: (payload, event) => this.on.webhooks.apply(p.name, payload, event.headers) });
    }
    this.registry.add(p);
  }

  providers(): string[] {
    return this.registry.names();
  }

  async approve_payout(actor: Actor, payoutId: string): Promise<PayoutView> {
    // Called by other plugins, not through a route: the operation's declared permission is checked here.
    permit(PAYOUT_PERMISSIONS.approve, actor);
    return this.on.payouts.approve(actor, payoutId);
  }

  async execute_payout(actor: Actor, payoutId: string, bankReference: string): Promise<PayoutView> {
    // Called by other plugins, not through a route: the operation's declared permission is checked here.
    permit(PAYOUT_PERMISSIONS.execute, actor);
    return this.on.payouts.execute(actor, payoutId, bankReference);
  }

  async process_payout(actor: Actor, payoutId: string): Promise<PayoutView> {
    // Called by other plugins, not through a route: the operation's declared permission is checked here.
    permit(PAYOUT_PERMISSIONS.process, actor);
    return this.on.payouts.process(actor, payoutId);
  }

  async fail_payout(actor: Actor, payoutId: string, reason: string): Promise<PayoutView> {
    // Called by other plugins, not through a route: the operation's declared permission is checked here.
    permit(PAYOUT_PERMISSIONS.fail, actor);
    return this.on.payouts.fail(actor, payoutId, reason);
  }

  /** `PUT /payments/{id}`: provider_reference, receipt_url and metadata, under `If-Match` (the resource's update). */
  update(actor: Actor, id: string, ifMatch: string | null | undefined, body: unknown): Promise<PaymentView> {
    return this.on.store.deps.resource.update(actor, id, ifMatch, body, false) as Promise<unknown> as Promise<PaymentView>;
  }

  process(actor: Actor, id: string) {
    return this.on.lifecycle.process(actor, id);
  }

  /** Administrators only ({@link PAYMENT_PERMISSIONS}). */
  complete(actor: Actor, id: string, input: CompleteInput): Promise<PaymentView> {
    return this.on.lifecycle.complete(actor, id, input);
  }

  cancel(actor: Actor, id: string, reason: string | null): Promise<PaymentView> {
    return this.on.lifecycle.cancel(actor, id, reason);
  }

  /** Administrators only ({@link PAYMENT_PERMISSIONS}). */
  refund(actor: Actor, id: string, input: RefundInput): Promise<PaymentView> {
    return this.on.refunds.refund(actor, id, input);
  }

  refundsOf(actor: Actor, id: string) {
    return this.on.refunds.refundsOf(actor, id);
  }

  /** See `PaymentReconciler.ledger`. */
  reconcileLedger() {
    return this.on.reconciler.ledger();
  }

  /** See `PaymentReconciler.refundsLeftReserved`. */
  reconcileRefunds(olderThanSeconds: number) {
    return this.on.reconciler.refundsLeftReserved(olderThanSeconds);
  }

  /**
   * The rule of `PUT /payments/{id}` (a BEFORE_UPDATE hook): the provider reference identifies the
   * capture, so once captured it changes only through completion.
   * @throws ConflictError when `data` changes it on a payment past `processing`
   */
  checkUpdate(old: Record<string, unknown>, data: Record<string, unknown>): void {
    const ref = data.provider_reference;
    if (ref !== undefined && ref !== old.provider_reference && !['pending', 'processing'].includes(String(old.status))) {
      throw new ConflictError(`provider_reference cannot change on a payment that is ${String(old.status)}`, { status: old.status, field: 'provider_reference' });
    }
  }
}
