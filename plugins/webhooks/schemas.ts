/**
 * Zod schemas of the webhooks plugin: provider registrations (validated at `register()` time, so a
 * bad one fails start-up) and the operator API inputs shared by REST and GraphQL.
 */
import { z } from 'zod';
import { pageQuery } from '../../core/http/schemas.ts';
import { pageSchema } from '../../core/page.ts';
import type { Actor } from '../../core/context.ts';
import { WEBHOOK_STATUSES } from './model.ts';
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
