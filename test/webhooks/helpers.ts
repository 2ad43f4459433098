/**
 * Shared by the webhook tests: a plugin registering test providers whose handlers record their
 * calls and can be told to fail, and helpers to sign and deliver raw bodies.
 */
import { createHmac } from 'node:crypto';
import { definePlugin, type Plugin } from '../../core/plugin.ts';
import type { ProviderRegistrationInput, WebhookEventContext } from '../../plugins/webhooks/index.ts';
import type { TestApp } from '../helpers/app.ts';

export const SECRET = 'whsec-test-secret-0123456789';

export interface Calls {
  list: { provider: string; payload: Record<string, unknown>; event: WebhookEventContext }[];
  /** When set, handlers throw this message. */
  failWith: string | null;
  /** When set, handlers wait on it before returning. */
  gate: Promise<void> | null;
}

export const newCalls = (): Calls => ({ list: [], failWith: null, gate: null });

/** A plugin registering `regs` (handler added: records the call, then fails or waits as `calls` says). */
export function providersPlugin(calls: Calls, regs: Omit<ProviderRegistrationInput, 'handler'>[], name = 'test-webhook-providers'): Plugin {
  return definePlugin({
    name,
    dependsOn: ['webhooks'],
    setup({ services }) {
      for (const r of regs) {
        services.get('webhooks').register({
          ...r,
          handler: async (payload, event) => {
            calls.list.push({ provider: r.provider, payload, event });
            if (calls.gate) await calls.gate;
            if (calls.failWith) throw new Error(calls.failWith);
          },
        });
      }
      return {};
    },
  });
}

export const hmac = (alg: 'sha256' | 'sha512', body: string | Buffer, secret = SECRET, enc: 'hex' | 'base64' = 'hex') =>
  createHmac(alg, secret).update(body).digest(enc);

/** POSTs `body` byte for byte to the receiver, without credentials. */
export const deliver = (t: TestApp, provider: string, body: string, headers: Record<string, string> = {}) =>
  t.http('POST', `/webhooks/${provider}`, { key: null, body, headers: { 'Content-Type': 'application/json', ...headers } });
