/** The registered payment providers, looked up by a payment's `provider` name. */
import { ConflictError } from '../../core/errors.ts';
import { PluginError } from '../../core/plugin.ts';
import { PAYMENT_STATUSES, type PaymentStatus } from './model.ts';
import type { PaymentProvider } from './providers.ts';

export class ProviderRegistry {
  private readonly byName = new Map<string, PaymentProvider>();

  /**
   * Checks a provider before it is added.
   * @throws PluginError on a bad or duplicate name, a missing function, an unknown status in `status_map`, or `webhook` without `handle_webhook`
   */
  check(p: PaymentProvider): void {
    if (!p || typeof p.name !== 'string' || !/^[a-z0-9][a-z0-9_-]{0,63}$/.test(p.name)) throw new PluginError(`Payment provider name "${String(p?.name)}" must match [a-z0-9][a-z0-9_-]{0,63}`);
    if (this.byName.has(p.name)) throw new PluginError(`Payment provider "${p.name}" is already registered`);
    for (const fn of ['create_payment', 'refund_payment'] as const) {
      if (typeof p[fn] !== 'function') throw new PluginError(`Payment provider "${p.name}": ${fn} must be a function`);
    }
    for (const [word, status] of Object.entries(p.status_map ?? {})) {
      if (!PAYMENT_STATUSES.includes(status)) throw new PluginError(`Payment provider "${p.name}": status_map.${word} = "${String(status)}" is not a Payment status (${PAYMENT_STATUSES.join(', ')})`);
    }
    if (p.webhook && typeof p.handle_webhook !== 'function') throw new PluginError(`Payment provider "${p.name}": webhook needs handle_webhook`);
  }

  /** Checks and adds a provider (see `check`). */
  add(p: PaymentProvider): void {
    this.check(p);
    this.byName.set(p.name, p);
  }

  names(): string[] {
    return [...this.byName.keys()];
  }

  /** The provider, or undefined when it is not registered (a reconciler then releases the refund). */
  find(name: string): PaymentProvider | undefined {
    return this.byName.get(name);
  }

  /** @throws ConflictError when the provider is not registered on this server */
  get(name: string): PaymentProvider {
    const p = this.byName.get(name);
    if (!p) throw new ConflictError(`Payment provider "${name}" is not registered on this server`, { provider: name });
    return p;
  }

  /** The Payment status a provider's status word means, or undefined when its `status_map` lacks it. */
  normalise(p: PaymentProvider, word: string): PaymentStatus | undefined {
    return Object.hasOwn(p.status_map, word) ? p.status_map[word] : undefined;
  }
}
