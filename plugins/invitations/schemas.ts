import { z } from 'zod';
import { pageQuery } from '../../core/http/schemas.ts';
import { pageSchema } from '../../lib/page.ts';
import { INVITATION_STATUSES } from './model.ts';

/** `POST /admin/invitations` body, GraphQL `createInvitation(input)`: into the administrator's tenant (`X-Tenant-Id` for system administrators). */
export const createInvitationInput = z
  .object({
    email: z.string().trim().toLowerCase().pipe(z.email()),
    /** `user`, `admin`, or custom roles of the tenant. @default ['user'] */
    roles: z.array(z.string().min(1).max(64)).min(1).max(50).optional(),
    features: z.array(z.string().min(1).max(100)).max(100).optional(),
  })
  .strict();
export type CreateInvitationInput = z.output<typeof createInvitationInput>;

/** `GET /admin/invitations` query: a page, newest first, optionally of one status. */
export const invitationsQuery = pageQuery(50, 500).extend({ status: z.enum(INVITATION_STATUSES).optional() });
export type InvitationsQuery = z.output<typeof invitationsQuery>;

/** `POST /invitations/accept` body, GraphQL `acceptInvitation`. */
export const acceptInvitationInput = z
  .object({
    token: z.string().min(20).max(200),
    /** The new person's name (default: the e-mail's local part). Ignored when a signed-in person accepts. */
    name: z.string().trim().min(1).max(200).optional(),
  })
  .strict();
export type AcceptInvitationInput = z.output<typeof acceptInvitationInput>;

/** An invitation in admin responses (never its token or hash). */
export const invitationView = z
  .object({
    id: z.string(), tenant_id: z.string(), email: z.string(), roles: z.array(z.string()), features: z.array(z.string()),
    status: z.enum(INVITATION_STATUSES), expires_at: z.date(), invited_by: z.string().nullable(), sent_count: z.number().int(),
    accepted_at: z.date().nullable(), accepted_user_id: z.string().nullable(), revoked_at: z.date().nullable(), created_at: z.date(),
  })
  .meta({ id: 'Invitation' });
export type InvitationView = z.output<typeof invitationView>;

export const invitationListView = pageSchema(invitationView);

/** `POST /invitations/accept`: the membership made, and a bearer token acting in it (to register a passkey). */
export const acceptedView = z.object({
  user_id: z.string(), tenant_id: z.string(), person_id: z.string(),
  token: z.string(), token_type: z.literal('Bearer'), expires_in: z.number().int().describe('Seconds'),
});
export type AcceptedView = z.output<typeof acceptedView>;
