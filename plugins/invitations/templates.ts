import type { MailTemplate } from '../mailer/index.ts';
import { escapeHtml } from '../../lib/html.ts';

/** Name of the invitation e-mail's template: register your own under it to replace the default. */
export const INVITATION_TEMPLATE = 'invitation';

/** What the invitation template is given. */
export interface InvitationMail {
  /** The single-use link (`INVITATION_LINK_URL?token=…`). */
  link: string;
  tenant_name: string;
  /** Name of the administrator who sent it (null for the system). */
  invited_by: string | null;
  expires_at: Date;
  roles: string[];
}

/** The default invitation e-mail, plain text and HTML. */
export const invitationTemplate: MailTemplate<InvitationMail> = (d) => {
  const who = d.invited_by ? `${d.invited_by} invites you` : 'You are invited';
  const until = d.expires_at.toISOString().replace('T', ' ').slice(0, 16);
  return {
    subject: `Invitation to ${d.tenant_name}`,
    text: `${who} to join ${d.tenant_name}.\n\nAccept the invitation (the link works once, until ${until} UTC):\n${d.link}\n\nIf you did not expect this e-mail, ignore it.\n`,
    html: `<p>${escapeHtml(who)} to join <strong>${escapeHtml(d.tenant_name)}</strong>.</p>\n<p><a href="${escapeHtml(d.link)}">Accept the invitation</a> (the link works once, until ${escapeHtml(until)} UTC).</p>\n<p>If you did not expect this e-mail, ignore it.</p>\n`,
  };
};
