// acmepay.ts — load it with PLUGINS=./acmepay.ts
import { definePlugin } from 'plugin-api-server'; // also types services.get('payments')

/** Your provider's SDK (its client, declared here so the example stands alone). */
declare const acme: {
  charge(o: { amount: string; currency: string; key: string }): Promise<{ state: string; id: string; url: string }>;
  refund(reference: string | null, amount: string, key: string): Promise<{ id: string }>;
};

export default definePlugin({
  name: 'acmepay',
  dependsOn: ['payments'],
  setup({ services }) {
    services.get('payments').registerProvider({
      name: 'acmepay',
      status_map: { AUTHORISED: 'processing', CAPTURED: 'completed', DECLINED: 'failed', VOIDED: 'cancelled' },
      async create_payment(intent) {
        const r = await acme.charge({ amount: intent.amount, currency: intent.currency, key: intent.idempotency_key });
        return { status: r.state, provider_reference: r.id, client_data: { redirect_url: r.url } };
      },
      async refund_payment(req) {
        return { provider_refund_id: (await acme.refund(req.provider_reference, req.amount, req.idempotency_key)).id };
      },
      async handle_webhook(payload) {
        return { kind: 'payment', provider_reference: String(payload.reference), status: String(payload.state) };
      },
      webhook: { secret: process.env.ACME_SECRET!, verifier: { type: 'hmac-sha256', prefix: 'sha256=' },
                 signature_header: 'x-acme-signature', event_id_path: 'event_id' },
    });
    return {};
  },
});
export {};
