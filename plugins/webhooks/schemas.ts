/**
 * Zod schemas of the webhooks plugin: provider registrations (validated at `register()` time, so a
 * bad one fails start-up) and the operator API inputs shared by REST and GraphQL.
 */
import { z } from 'zod';
import { objectId, pageQuery } from '../../core/http/schemas.ts';
import { pageSchema } from '../../lib/page.ts';
import type { Actor } from '../../core/context.ts';
import { DELIVERY_STATUSES, WEBHOOK_STATUSES } from './model.ts';
import { PRESET_NAMES } from './presets.ts';
import { isCustomVerifier, type WebhookVerifier } from './verifiers.ts';

/** Options of the webhooks plugin: `webhooksPlugin.configure({ ... })`. */
export const webhooksOptions = z.object({
  /** How long a claimed event may stay `processing` before a redelivery or a retry takes it over (crash recovery). */
  lease_seconds: z.number().int().min(1).max(86_400).default(300),
});

const headerName = z
  .string()
  .regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/, 'must be an HTTP header name')
  .transform((s) => s.toLowerCase());
const dottedPath = z.string().regex(/^[^.]+(\.[^.]+)*$/, 'must be a dotted path such as "id" or "data.object.id"');

/** The data form of a verifier; a custom verifier (an object with `verify`) is accepted as is. */
export const verifierSpec = z.union([
  z.object({ type: z.enum(['hmac-sha256', 'hmac-sha512']), prefix: z.string().optional(), encoding: z.enum(['hex', 'base64']).default('hex') }).strict(),
  z.object({ type: z.enum(PRESET_NAMES as [string, ...string[]]) }).strict(),
]);

/**
 * Parameters of `services.get('webhooks').register({...})`: the provider's name, handler, secret
 * and verifier, where its event id and type are found, its headers, and how many redeliveries may
 * re-run a failed handler.
 */
export const providerRegistration = z
  .object({
    /** Name in the receiver path `/webhooks/{provider}`. */
    provider: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, 'must be 1-64 lowercase letters, digits, - or _, starting with a letter or digit'),
    handler: z.custom<WebhookHandler>((v) => typeof v === 'function', { message: 'must be an async function (payload, context)' }),
    secret: z.string({ error: 'is required' }).min(1, 'is required'),
    verifier: z.union([z.custom<WebhookVerifier>(isCustomVerifier), verifierSpec], {
      error: `must be { type: 'hmac-sha256' | 'hmac-sha512', prefix?, encoding? }, { type: ${PRESET_NAMES.map((n) => `'${n}'`).join(' | ')} } or an object with an async verify()`,
    }),
    /** Dotted path of the event id in the JSON payload (the idempotency key). */
    event_id_path: dottedPath.optional(),
    event_type_path: dottedPath.optional(),
    /** Where the event id comes from when the provider sends it as a header (GitHub, Standard Webhooks). */
    event_id_header: headerName.optional(),
    event_type_header: headerName.optional(),
    /** @default the preset's, else `x-signature` */
    signature_header: headerName.optional(),
    delivery_id_header: headerName.optional(),
    /**
     * Header carrying the delivery's timestamp in Unix seconds, for a provider that sends one (the
     * presets that sign one read it themselves). A delivery without it, or more than 300 s before
     * or after now, is refused like a bad signature.
     */
    timestamp_header: headerName.optional(),
    /** Provider redeliveries that may re-run a failed handler. @default 3 */
    max_retries: z.number().int().min(0).max(100).default(3),
  })
  .strict();
export type ProviderRegistrationInput = z.input<typeof providerRegistration>;

/** What a handler learns besides the payload. */
export interface WebhookEventContext {
  provider: string;
  event_id: string;
  event_type: string | null;
  delivery_id: string | null;
  /** The stored (allow-listed) headers. */
  headers: Record<string, string>;
  /** 1 for the first run, then one more per re-run (redelivery of a failed event, dead-letter retry). */
  attempt: number;
  /** Id of the stored WebhookEvent. */
  id: string;
  /** The actor of any service the handler uses: `systemActor()`; webhooks run outside the identity of whoever called the receiver. */
  actor: Actor;
}

/** A provider's handler; a throw (or rejection) marks the event `failed` with the error's message. */
export type WebhookHandler = (payload: Record<string, unknown>, event: WebhookEventContext) => Promise<unknown> | unknown;

/** `GET /webhooks/events` and GraphQL `webhookEvents`. */
export const listQuery = z
  .object({
    provider: z.string().min(1).max(64).optional(),
    status: z.enum(WEBHOOK_STATUSES).optional(),
    ...pageQuery(25, 100).shape,
  })
  .strict();
export type ListQuery = z.output<typeof listQuery>;

/** `GET /webhooks/dead-letter` and GraphQL `webhookDeadLetter`. */
export const deadLetterQuery = z
  .object({ provider: z.string().min(1).max(64).optional(), ...pageQuery(25, 100).shape })
  .strict();
export type DeadLetterQuery = z.output<typeof deadLetterQuery>;

export const providerParams = z.object({ provider: z.string().min(1).max(200) });
export const retryParams = z.object({ event_id: z.string().min(1).max(500) });

/** `DELETE /webhooks/events/purge`. */
export const purgeQuery = (defaultDays: number) =>
  z.object({ retention_days: z.coerce.number().int().min(1).max(36500).default(defaultDays) }).strict();

export const eventView = z.object({
  id: z.string(),
  provider: z.string(),
  event_id: z.string(),
  event_type: z.string().nullable(),
  delivery_id: z.string().nullable(),
  payload: z.record(z.string(), z.unknown()),
  headers: z.record(z.string(), z.string()),
  status: z.enum(WEBHOOK_STATUSES),
  processed_at: z.date().nullable(),
  error: z.string().nullable(),
  retry_count: z.number().int(),
  is_duplicate: z.boolean(),
  attempts: z.number().int(),
  created_at: z.date(),
  updated_at: z.date(),
});
export type WebhookEventView = z.infer<typeof eventView>;

export const listResponse = pageSchema(eventView);
export const receiveResponse = z.object({ status: z.enum(['ok', 'failed', 'already_processed', 'processing']), event_id: z.string().optional() });
/** The receiver's JSON body. */
export type ReceiveBody = z.infer<typeof receiveResponse>;
export const retryResponse = z.object({ id: z.string(), event_id: z.string(), status: z.enum(WEBHOOK_STATUSES), error: z.string().nullable() });
export type RetryResult = z.infer<typeof retryResponse>;
export const purgeResponse = z.object({ deleted_count: z.number().int(), retention_days: z.number().int(), cutoff_date: z.date() });
export type PurgeResult = z.infer<typeof purgeResponse>;

// --- outbound webhooks --------------------------------------------------------------------------

const endpointUrl = z
  .string()
  .max(2048)
  .refine((s) => URL.canParse(s) && ['http:', 'https:'].includes(new URL(s).protocol), 'must be an absolute http(s) URL');
const eventTypeList = z
  .array(z.string().min(1).max(200))
  .min(1)
  .max(100)
  .transform((a) => [...new Set(a)]);

const roleName = z.string().min(1).max(100);

/** `POST /webhook-endpoints` and GraphQL `createWebhookEndpoint`. */
export const createEndpointInput = z
  .object({
    url: endpointUrl,
    /** Catalogue types to receive; `*` for every type. */
    event_types: eventTypeList,
    description: z.string().max(500).nullable().optional(),
    enabled: z.boolean().default(true),
    /** Deliveries carry only what this role may read (a built-in role or one of the tenant's). */
    role: roleName.nullable().optional(),
  })
  .strict();
export type CreateEndpointInput = z.output<typeof createEndpointInput>;

/** `PATCH /webhook-endpoints/{id}` and GraphQL `updateWebhookEndpoint`: the fields to change. */
export const updateEndpointInput = z
  .object({
    url: endpointUrl.optional(),
    event_types: eventTypeList.optional(),
    description: z.string().max(500).nullable().optional(),
    enabled: z.boolean().optional(),
    /** null: deliver every event whole again. */
    role: roleName.nullable().optional(),
  })
  .strict();
export type UpdateEndpointInput = z.output<typeof updateEndpointInput>;

export const endpointListQuery = pageQuery(25, 100).strict();
export type EndpointListQuery = z.output<typeof endpointListQuery>;
export const deliveryListQuery = z.object({ status: z.enum(DELIVERY_STATUSES).optional(), ...pageQuery(25, 100).shape }).strict();
export type DeliveryListQuery = z.output<typeof deliveryListQuery>;
export const deliveryParams = z.object({ id: objectId, delivery_id: objectId });

/** An endpoint as every response shows it: never with a secret. */
export const endpointView = z.object({
  id: z.string(),
  url: z.string(),
  description: z.string().nullable(),
  event_types: z.array(z.string()),
  enabled: z.boolean(),
  role: z.string().nullable().describe('Deliveries carry only what this role may read: rows outside its read rules are not delivered, data is masked to its fields (null: every event whole)'),
  disabled_reason: z.string().nullable().describe('Why the server disabled the endpoint (null when enabled, or disabled by hand)'),
  secret_rotated_at: z.date().nullable(),
  created_at: z.date(),
  updated_at: z.date(),
});
export type EndpointView = z.output<typeof endpointView>;

/** Creation and rotation answer the secret, the only time it is shown. */
export const endpointWithSecret = endpointView.extend({
  secret: z.string().describe('Signing secret (whsec_ + base64), Standard Webhooks format; shown only now'),
});
export type EndpointWithSecret = z.output<typeof endpointWithSecret>;
export const endpointPage = pageSchema(endpointView);

export const attemptView = z.object({
  status: z.number().int().nullable().describe('HTTP status of the response; null when none came'),
  duration_ms: z.number().int(),
  error: z.string().nullable(),
  response_excerpt: z.string().nullable().describe('First 500 characters of the response body'),
  attempted_at: z.date(),
});
export type AttemptView = z.output<typeof attemptView>;

export const deliveryView = z.object({
  id: z.string(),
  endpoint_id: z.string(),
  event_id: z.string(),
  event_type: z.string(),
  status: z.enum(DELIVERY_STATUSES),
  attempts: z.number().int(),
  last_attempt: attemptView.nullable(),
  attempt_log: z.array(attemptView).describe('Every recorded attempt, oldest first: the last 20 (older ones are dropped)'),
  created_at: z.date(),
  next_attempt_at: z.date().nullable(),
});
export type DeliveryView = z.output<typeof deliveryView>;
export const deliveryPage = pageSchema(deliveryView);
