import { definePlugin, z } from 'plugin-api-server'; // also types services.get('webhooks')

export const billingPlugin = definePlugin({
  name: 'billing',
  dependsOn: ['webhooks'],
  options: z.object({ acme_secret: z.string().min(1) }), // billingPlugin.configure({ acme_secret })
  setup({ services, options }) {
    services.get('webhooks').register({
      provider: 'acme',                 // POST /webhooks/acme
      secret: options.acme_secret,      // from options or config/, never process.env
      verifier: { type: 'hmac-sha256', prefix: 'sha256=', encoding: 'hex' },
      signature_header: 'X-Acme-Signature',
      event_id_path: 'data.id',         // dotted path in the JSON payload: the idempotency key
      event_type_path: 'type',          // optional
      delivery_id_header: 'X-Acme-Delivery', // optional
      max_retries: 3,                   // optional, default 3
      handler: async (payload, event) => {
        // event: { id, provider, event_id, event_type, delivery_id, headers, attempt, actor }
        // Use event.actor (systemActor()) as the actor of any service you call.
      },
    });
    return {};
  },
});
export {};
