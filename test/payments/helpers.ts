/** Shared by the payments tests: an app with the payments stack, tenants, and payment shortcuts. */
import { definePlugin, type Plugin } from '../../core/plugin.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { webhooksPlugin } from '../../plugins/webhooks/index.ts';
import { paymentsPlugin, type PaymentProvider } from '../../plugins/payments/index.ts';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { addMembership } from '../helpers/memberships.ts';

/** resources (no demo resources), audit, webhooks and payments, with payments on. */
export const paymentsApp = (opts: { config?: Record<string, string>; plugins?: Plugin[] } = {}) =>
  buildTestApp({
    plugins: [resourcesPlugin.configure({ resources: [] }), auditPlugin, webhooksPlugin, paymentsPlugin, ...(opts.plugins ?? [])],
    config: { PAYMENTS_ENABLED: 'true', RATE_LIMIT_ENABLED: 'false', ...opts.config },
  });

/** A plugin registering the given providers through the `payments` service (as a provider plugin would). */
export const providerPlugin = (...providers: PaymentProvider[]): Plugin =>
  definePlugin({
    name: `test-providers-${providers.map((p) => p.name).join('-')}`,
    dependsOn: ['payments'],
    setup({ services }) {
      for (const p of providers) services.get('payments').registerProvider(p);
      return {};
    },
  });

/** A tenant with an admin and a plain user. */
export async function tenant(t: TestApp, alsoIn?: { adminId: string; userId: string }) {
  // With `alsoIn`, the new tenant's administrator and user are second memberships of that tenant's people.
  const admin = alsoIn ? await addMembership(t, alsoIn.adminId, { roles: ['admin'] }) : await createTenantUser(t, { roles: ['admin'] });
  const user = alsoIn ? await addMembership(t, alsoIn.userId, { tenantId: admin.tenantId, roles: ['user'] }) : await createTenantUser(t, { tenantId: admin.tenantId, roles: ['user'] });
  return { tenantId: admin.tenantId, admin: admin.key, adminId: admin.userId, user: user.key, userId: user.userId };
}

export const body = (over: Record<string, unknown> = {}) => ({
  resource_type: 'order', resource_id: 'ord-1', user_id: 'cust-1', user_name: 'Ada Lovelace', amount: '10.00', currency: 'USD', provider: 'manual', ...over,
});

/** POST /payments, expecting 201; returns the payment. */
export async function create(t: TestApp, key: string, over: Record<string, unknown> = {}) {
  const res = await t.http('POST', '/payments', { key, json: body(over) });
  if (res.status !== 201) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as Record<string, any>;
}

/** A manual payment taken to `completed` (create, process, complete). */
export async function completed(t: TestApp, key: string, over: Record<string, unknown> = {}, ref = `bank-${Math.random().toString(36).slice(2)}`) {
  const p = await create(t, key, over);
  const pr = await t.http('POST', `/payments/${p._id}/process`, { key, json: {} });
  if (pr.status !== 200) throw new Error(`process: ${pr.status} ${JSON.stringify(pr.body)}`);
  const c = await t.http('POST', `/payments/${p._id}/complete`, { key, json: { provider_reference: ref, provider_status: 'paid' } });
  if (c.status !== 200) throw new Error(`complete: ${c.status} ${JSON.stringify(c.body)}`);
  return c.body as Record<string, any>;
}

/** Raw collection access, for checks behind the API's back. */
export const col = (t: TestApp, name: string) => t.app.db.conn.collection(name);
