import { givenArgs, pageObject, parseInput, scopes, type Builder } from '../../core/graphql.ts';
import { idParams } from '../../core/http/schemas.ts';
import { acceptInvitationInput, createInvitationInput, invitationsQuery, type AcceptedView, type InvitationView } from './schemas.ts';
import { INVITATION_PERMISSIONS, type InvitationService } from './service.ts';

/** `Invitation`, `invitations` (a page), and the create, resend, revoke and accept mutations, validated with the REST schemas. */
export function invitationsGraphql(builder: Builder, service: InvitationService): void {
  const Invitation = builder.objectRef<InvitationView>('Invitation');
  Invitation.implement({
    fields: (t) => ({
      id: t.exposeID('id', { nullable: false }),
      tenant_id: t.exposeString('tenant_id', { nullable: false }),
      email: t.exposeString('email', { nullable: false }),
      roles: t.exposeStringList('roles', { nullable: false }),
      features: t.exposeStringList('features', { nullable: false }),
      status: t.exposeString('status', { nullable: false }),
      expires_at: t.expose('expires_at', { type: 'DateTime', nullable: false }),
      invited_by: t.exposeString('invited_by'),
      sent_count: t.exposeInt('sent_count', { nullable: false }),
      accepted_at: t.expose('accepted_at', { type: 'DateTime' }),
      accepted_user_id: t.exposeString('accepted_user_id'),
      revoked_at: t.expose('revoked_at', { type: 'DateTime' }),
      created_at: t.expose('created_at', { type: 'DateTime', nullable: false }),
    }),
  });
  const InvitationPage = pageObject(builder, 'InvitationPage', Invitation);
  const Accepted = builder.objectRef<AcceptedView>('InvitationAcceptance');
  Accepted.implement({
    fields: (t) => ({
      user_id: t.exposeString('user_id', { nullable: false }),
      tenant_id: t.exposeString('tenant_id', { nullable: false }),
      person_id: t.exposeString('person_id', { nullable: false }),
      token: t.exposeString('token', { nullable: false }),
      token_type: t.exposeString('token_type', { nullable: false }),
      expires_in: t.exposeInt('expires_in', { nullable: false }),
    }),
  });
  builder.queryFields((t) => ({
    invitations: t.withAuth(scopes(INVITATION_PERMISSIONS.list)).field({
      type: InvitationPage, nullable: false, description: "Your tenant's invitations, newest first, as GET /admin/invitations",
      args: { page: t.arg.int(), per_page: t.arg.int(), status: t.arg.string() },
      resolve: (_r, a, ctx) => service.list(ctx.actor, parseInput(invitationsQuery, givenArgs(a))),
    }),
  }));
  builder.mutationFields((t) => ({
    createInvitation: t.withAuth(scopes(INVITATION_PERMISSIONS.create)).field({
      type: Invitation, nullable: false, description: 'Invite an e-mail address into your tenant (input: email, roles, features)',
      args: { input: t.arg({ type: 'JSON', required: true }) },
      resolve: (_r, a, ctx) => service.create(ctx.actor, parseInput(createInvitationInput, a.input)),
    }),
    resendInvitation: t.withAuth(scopes(INVITATION_PERMISSIONS.resend)).field({
      type: Invitation, nullable: false, args: { id: t.arg.string({ required: true }) },
      resolve: (_r, a, ctx) => service.resend(ctx.actor, parseInput(idParams, a).id),
    }),
    revokeInvitation: t.withAuth(scopes(INVITATION_PERMISSIONS.revoke)).field({
      type: Invitation, nullable: false, args: { id: t.arg.string({ required: true }) },
      resolve: (_r, a, ctx) => service.revoke(ctx.actor, parseInput(idParams, a).id),
    }),
    acceptInvitation: t.withAuth(scopes(INVITATION_PERMISSIONS.accept)).field({
      type: Accepted, nullable: false, description: "Accept an invitation with its link's token (signed in with the invited e-mail: a membership of your person)",
      args: { token: t.arg.string({ required: true }), name: t.arg.string() },
      resolve: (_r, a, ctx) => service.accept(ctx.actor ?? null, parseInput(acceptInvitationInput, givenArgs(a))),
    }),
  }));
}
