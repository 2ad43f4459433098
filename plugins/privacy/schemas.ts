/**
 * Inputs and outputs of the privacy API. REST routes and GraphQL resolvers validate with the same
 * schemas, so both answer a bad value with the same 422 `VALIDATION_ERROR`.
 */
import { z } from 'zod';
import { objectId, pageQuery } from '../../core/http/schemas.ts';
import { pageSchema } from '../../lib/page.ts';
import { ERASURE_ACTIONS, ERASURE_STATUSES, LINKED_ACTIONS } from './model.ts';

/** A consent purpose: a short machine label, e.g. `marketing_email`, `analytics`. */
export const purpose = z.string().regex(/^[a-z0-9][a-z0-9_.:-]{0,63}$/, 'must be 1-64 lowercase letters, digits, _ . : or -, starting with a letter or digit');

const boolString = z.enum(['true', 'false']).transform((v) => v === 'true');

/** `POST /privacy/consents` and GraphQL `grantConsent`. */
export const grantBody = z
  .object({
    purpose,
    /** Where the consent was collected. @default 'api' (REST) / 'graphql' */
    source: z.string().trim().min(1).max(100).optional(),
  })
  .strict();
export type GrantInput = z.output<typeof grantBody>;

/** `GET /privacy/consents`: own consents; an administrator may name a user within their tenant scope. */
export const consentsQuery = pageQuery(50, 500)
  .extend({
    user_id: objectId.optional(),
    purpose: purpose.optional(),
    active: boolString.optional(),
  })
  .strict();
export type ConsentsQuery = z.output<typeof consentsQuery>;

/** `POST /privacy/erasure-requests` and GraphQL `requestErasure`. */
export const erasureBody = z.object({ user_id: objectId }).strict();

/** `GET /privacy/erasure-requests`. */
export const erasureListQuery = pageQuery(50, 500)
  .extend({
    status: z.enum(ERASURE_STATUSES).optional(),
    user_id: objectId.optional(),
  })
  .strict();
export type ErasureListQuery = z.output<typeof erasureListQuery>;

export const userParams = z.object({ user_id: objectId });

/** Parameters of the `execute_erasure` job. */
export const erasureJobParams = z.object({ request_id: objectId.describe('The erasure request to execute') });


// Response shapes, for the OpenAPI description.

export const consentResponse = z.object({
  id: z.string(),
  user_id: z.string(),
  tenant_id: z.string(),
  purpose: z.string(),
  granted_at: z.iso.datetime(),
  revoked_at: z.iso.datetime().nullable(),
  source: z.string(),
  active: z.boolean(),
});
export const consentPageResponse = pageSchema(consentResponse);

/** `erasure.item_recorded`: the ledger row of an item an erasure changed. */
export const erasureItemEventData = z.object({
  id: z.string(),
  request_id: z.string(),
  resource: z.string(),
  item_id: z.string(),
  action: z.enum(ERASURE_ACTIONS),
});

const collectionCount = z.object({ name: z.string(), action: z.enum(LINKED_ACTIONS), count: z.number().int(), fields: z.array(z.string()) });

export const erasureResponse = z.object({
  id: z.string(),
  tenant_id: z.string(),
  user_id: z.string(),
  requested_by: z.string().nullable(),
  status: z.enum(ERASURE_STATUSES),
  preview: z.object({ collections: z.array(collectionCount), consents: z.number().int(), api_keys: z.number().int(), account: z.boolean() }),
  result: z
    .object({
      documents_depersonalized: z.number().int(),
      documents_deleted: z.number().int(),
      consents_revoked: z.number().int(),
      api_keys_revoked: z.number().int(),
      account_disabled: z.boolean(),
      audit_entries_scrubbed: z.number().int(),
    })
    .nullable(),
  error: z.string().nullable(),
  attempts: z.number().int(),
  job_run_id: z.string().nullable(),
  created_at: z.iso.datetime(),
  started_at: z.iso.datetime().nullable(),
  completed_at: z.iso.datetime().nullable(),
});
export const erasurePageResponse = pageSchema(erasureResponse);

export const exportResponse = z.object({
  generated_at: z.iso.datetime(),
  user: z.record(z.string(), z.unknown()),
  consents: z.array(consentResponse),
  collections: z.record(z.string(), z.array(z.record(z.string(), z.unknown()))),
});
