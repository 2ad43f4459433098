import { z } from 'zod';
import { definePlugin } from '../../core/plugin.ts';
import { defineRoute } from '../../core/http/route.ts';
import { idParams } from '../../core/http/schemas.ts';
import { pageHeaderDocs, setPageHeaders } from '../../lib/page.ts';
import type { EventTypeDefinition } from '../events/public/contributions.ts';
import { invitationModel } from './model.ts';
import { acceptedView, acceptInvitationInput, createInvitationInput, invitationListView, invitationsQuery, invitationView } from './schemas.ts';
import { INVITATION_CREDENTIAL_KIND, INVITATION_PERMISSIONS, InvitationService, invitationErrorCodes } from './service.ts';
import { invitationsGraphql } from './graphql.ts';
import { INVITATION_TEMPLATE, invitationTemplate } from './templates.ts';

export { INVITATION_TEMPLATE, type InvitationMail } from './templates.ts';

const data = z.object(invitationView.shape);
const invitationEventTypes: EventTypeDefinition[] = [
  { name: 'invitation.created', description: 'An administrator invited an e-mail address into the tenant; data is the invitation (never its token)', data },
  { name: 'invitation.resent', description: 'An invitation was sent again with a new link and a new expiry', data },
  { name: 'invitation.revoked', description: 'An invitation was revoked: its link no longer works', data },
  { name: 'invitation.accepted', description: 'An invitation was accepted: accepted_user_id is the membership made (its user.created is stored too)', data },
];

/**
 * Invitations by e-mail: `POST/GET /admin/invitations`, resend and revoke, and
 * `POST /invitations/accept`, which makes the membership (and the person, if new). Mail through the
 * `mailer` service (template `invitation`, replaceable).
 */
export const invitationsPlugin = definePlugin({
  name: 'invitations',
  dependsOn: ['mailer'],
  setup({ db, config, log, services, tenancy }) {
    const identity = services.get('identity');
    const mailer = services.get('mailer');
    const events = services.get('events');
    mailer.registerTemplate(INVITATION_TEMPLATE, invitationTemplate, { builtIn: true });
    const service = new InvitationService({
      Invitation: invitationModel(db), events, tenancy, identity, memberships: services.get('memberships'), mailer,
      ttlHours: config.INVITATION_TTL_HOURS, linkUrl: config.INVITATION_LINK_URL, log,
    });
    events.addSource(service.source);
    identity.registerCredentialKind(INVITATION_CREDENTIAL_KIND, (id) => service.resolveCredential(id));
    const tags = ['invitations'];
    return {
      eventTypes: invitationEventTypes,
      errorCodes: invitationErrorCodes,
      routes: [
        defineRoute({
          method: 'POST', path: '/admin/invitations', tags, auth: INVITATION_PERMISSIONS.create, status: 201, summary: 'Invite an e-mail address into your tenant (an e-mail with a single-use link)',
          body: createInvitationInput, response: invitationView, docs: { errors: [409, 503] },
          handler: ({ actor, body }) => service.create(actor, body),
        }),
        defineRoute({
          method: 'GET', path: '/admin/invitations', tags, auth: INVITATION_PERMISSIONS.list, summary: "Your tenant's invitations, newest first", response: invitationListView,
          query: invitationsQuery, docs: { responseHeaders: pageHeaderDocs('Matching invitations') },
          handler: async ({ actor, query, ctx }) => setPageHeaders(ctx, await service.list(actor, query)),
        }),
        defineRoute({
          method: 'POST', path: '/admin/invitations/:id/resend', tags, auth: INVITATION_PERMISSIONS.resend, summary: 'Send an invitation again with a new link (the old one stops working)',
          params: idParams, response: invitationView, docs: { errors: [404, 409, 410, 503] },
          handler: ({ actor, params }) => service.resend(actor, params.id),
        }),
        defineRoute({
          method: 'DELETE', path: '/admin/invitations/:id', tags, auth: INVITATION_PERMISSIONS.revoke, summary: 'Revoke an invitation: its link no longer works',
          params: idParams, response: invitationView, docs: { errors: [404, 409, 410] },
          handler: ({ actor, params }) => service.revoke(actor, params.id),
        }),
        defineRoute({
          method: 'POST', path: '/invitations/accept', tags, auth: INVITATION_PERMISSIONS.accept,
          summary: "Accept an invitation with its link's token: a membership (and a person, if new) and a bearer token acting in it",
          body: acceptInvitationInput, response: acceptedView, docs: { errors: [404, 409, 410] },
          handler: ({ actor, body }) => service.accept(actor ?? null, body),
        }),
      ],
      graphql: (builder) => invitationsGraphql(builder, service),
    };
  },
});

export default invitationsPlugin;
