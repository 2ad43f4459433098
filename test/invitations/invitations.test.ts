/**
 * Invitations end to end against a real SMTP server (smtp-server): the e-mail and its link, accept
 * (a new person, or a membership of the signed-in person with that e-mail), single use (twice,
 * at once), expiry (the stored expiry moved into the past), revocation, resend (new link, old one
 * dead), listing; tenant isolation over REST and GraphQL; bad input envelopes with nothing written
 * or mailed; a refused e-mail; e-mail to the log without SMTP_URL and refused in production; a
 * plugin replacing the template.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, createTenantUser, envelope, expectError, type TestApp } from '../helpers/app.ts';
import { startSmtp, tokenIn, type ReceivedMail } from '../helpers/smtp.ts';
import { mailerPlugin } from '../../plugins/mailer/index.ts';
import { INVITATION_TEMPLATE, invitationsPlugin, type InvitationMail } from '../../plugins/invitations/index.ts';
import { webauthnPlugin } from '../../plugins/webauthn/index.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { definePlugin } from '../../core/plugin.ts';
import { SoftAuthenticator } from '../webauthn/authenticator.ts';
import { PASSKEY_CONFIG, captureLogger } from '../webauthn/helpers.ts';
import { until } from '../realtime/helpers.ts';
import { addMembership } from '../helpers/memberships.ts';

const LINK = 'https://console.example.test/invite';
let smtp: Awaited<ReturnType<typeof startSmtp>>;
let t: TestApp;
type U = Awaited<ReturnType<typeof createTenantUser>>;
let adminA: U;
let adminB: U;
let plainA: U;

beforeAll(async () => {
  smtp = await startSmtp();
  t = await buildTestApp({
    plugins: [auditPlugin, webauthnPlugin, mailerPlugin, invitationsPlugin],
    config: { ...PASSKEY_CONFIG, SMTP_URL: smtp.smtpUrl, MAIL_FROM: 'Test <no-reply@example.test>', INVITATION_LINK_URL: LINK, RATE_LIMIT_ENABLED: 'false' },
  });
  adminA = await createTenantUser(t, { tenant: 'Tenant A', roles: ['admin'] });
  // B's administrator is A's administrator's second membership: one person, two tenants.
  adminB = await addMembership(t, adminA.userId, { roles: ['admin'] });
  plainA = await createTenantUser(t, { tenantId: adminA.tenantId });
});
afterAll(async () => {
  await t?.close();
  await smtp?.close();
});

const col = (name: string) => t.app.db.conn.collection(name);
const counts = async () => ({ invitations: await col('invitations').countDocuments(), users: await col('users').countDocuments(), mails: smtp.messages.length });
let n = 0;
const freshEmail = () => `invitee-${Date.now()}-${n++}@example.com`;

/** Invite and return the invitation with the message it sent. */
async function invite(key: string, json: Record<string, unknown>): Promise<{ inv: any; mail: ReceivedMail }> {
  const before = smtp.messages.length;
  const res = await t.http('POST', '/admin/invitations', { key, json });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  const mail = await until(() => smtp.messages[before], 10_000, 'the e-mail');
  return { inv: res.body, mail };
}
const accept = (token: string, opts: { key?: string | null; name?: string } = {}) =>
  t.http('POST', '/invitations/accept', { key: opts.key ?? null, json: { token, ...(opts.name ? { name: opts.name } : {}) } });

describe('an invitation end to end', () => {
  it('sends an e-mail with a single-use link (plain and HTML), stores only its hash, and accepting makes the membership and the person', async () => {
    const email = freshEmail();
    const { inv, mail } = await invite(adminA.key, { email, roles: ['user'], features: ['reports'] });
    expect(inv).toMatchObject({ email, tenant_id: adminA.tenantId, status: 'pending', roles: ['user'], features: ['reports'], sent_count: 1, invited_by: adminA.userId });
    expect(JSON.stringify(inv)).not.toMatch(/token/);
    expect(mail.to).toEqual([email]);
    expect(mail.from).toBe('no-reply@example.test');
    expect(mail.raw).toMatch(/Subject: Invitation to Tenant A/);
    const token = tokenIn(mail);
    expect(mail.text).toContain(`${LINK}?token=${token}`);
    expect(mail.html).toContain(`href="${LINK}?token=${token}"`);
    const stored = await col('invitations').findOne({ email });
    expect(stored!.token_hash).toBe(createHash('sha256').update(token).digest('hex'));
    expect(JSON.stringify(stored)).not.toContain(token);
    expect(new Date(stored!.expires_at).getTime() - Date.now()).toBeGreaterThan(71 * 3_600_000);

    const ok = await accept(token, { name: 'New Person' });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect(ok.body).toMatchObject({ tenant_id: adminA.tenantId, token_type: 'Bearer' });
    expect(ok.body.person_id).toBe(ok.body.user_id);
    const me = await t.http('GET', '/auth/me', { key: null, token: ok.body.token });
    expect(me.body).toMatchObject({ id: ok.body.user_id, email, name: 'New Person', tenant_id: adminA.tenantId, roles: ['user'], features: ['reports'] });
    expect(me.body.memberships).toHaveLength(1);
    // The new person registers a passkey with the token it was given (the existing registration flow).
    const device = new SoftAuthenticator();
    const opts = await t.http('POST', '/auth/webauthn/register/options', { key: null, token: ok.body.token });
    expect(opts.status).toBe(200);
    expect((await t.http('POST', '/auth/webauthn/register', { key: null, token: ok.body.token, json: device.makeCredential(opts.body.challenge) })).status).toBe(201);

    // Twice: refused, nothing written.
    const before = await counts();
    expectError(await accept(token), 409, 'INVITATION_ACCEPTED');
    expect(await counts()).toEqual(before);
    const listed = await t.http('GET', '/admin/invitations?status=accepted', { key: adminA.key });
    expect(listed.body.items.find((i: { id: string }) => i.id === inv.id)).toMatchObject({ status: 'accepted', accepted_user_id: ok.body.user_id });
    // Audited and on the event log, as the membership it made.
    const evs = await t.http('GET', `/events?limit=100`, { key: adminA.key });
    const types = (evs.body.items as { type: string; data: { id: string; email?: string } }[]).filter((e) => e.data.id === inv.id || e.data.id === ok.body.user_id).map((e) => e.type);
    expect(types).toEqual(expect.arrayContaining(['invitation.created', 'invitation.accepted', 'user.created']));
    const audit = await t.http('GET', `/admin/audit-log?resource=invitations&resource_id=${inv.id}`, { key: adminA.key });
    expect(audit.status).toBe(200);
    expect((audit.body.items as { operation: string }[]).map((e) => e.operation).sort()).toEqual(['insert', 'update']);
  });

  it('two acceptances at once: exactly one membership', async () => {
    const email = freshEmail();
    const { mail } = await invite(adminA.key, { email });
    const both = await Promise.all([accept(tokenIn(mail)), accept(tokenIn(mail))]);
    expect(both.map((r) => r.status).sort()).toEqual([200, 409]);
    expect(await col('users').countDocuments({ email, is_deleted: false })).toBe(1);
  });

  it('a signed-in person with the invited e-mail gets a second membership of the same person; anyone else signed in gets a new person', async () => {
    const email = freshEmail();
    const member = await createTenantUser(t, { email, tenantId: adminA.tenantId });
    const { mail } = await invite(adminB.key, { email, roles: ['admin'] });
    const ok = await accept(tokenIn(mail), { key: member.key });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect(ok.body.person_id).toBe(member.userId);
    const me = await t.http('GET', '/auth/me', { key: member.key });
    expect(me.body.memberships.map((m: { tenant_id: string; roles: string[] }) => [m.tenant_id, m.roles])).toEqual([[adminA.tenantId, ['user']], [adminB.tenantId, ['admin']]]);
    // The new membership's token acts in tenant B only.
    expect((await t.http('GET', '/auth/me', { key: null, token: ok.body.token })).body).toMatchObject({ tenant_id: adminB.tenantId, roles: ['admin'] });

    const other = freshEmail();
    const second = await invite(adminB.key, { email: other });
    const byStranger = await accept(tokenIn(second.mail), { key: plainA.key });
    expect(byStranger.status).toBe(200);
    expect(byStranger.body.person_id).toBe(byStranger.body.user_id);
    expect((await t.http('GET', '/auth/me', { key: plainA.key })).body.memberships).toHaveLength(1);
  });

  it('expired (its stored expiry moved into the past): refused, nothing written; resent: a new link and expiry, the old link dead', async () => {
    const email = freshEmail();
    const { inv, mail } = await invite(adminA.key, { email });
    await col('invitations').updateOne({ email }, { $set: { expires_at: new Date(Date.now() - 1000) } });
    const before = await counts();
    expectError(await accept(tokenIn(mail)), 410, 'INVITATION_EXPIRED');
    expect(await counts()).toEqual(before);

    const resent = await t.http('POST', `/admin/invitations/${inv.id}/resend`, { key: adminA.key });
    expect(resent.status, JSON.stringify(resent.body)).toBe(200);
    expect(resent.body).toMatchObject({ status: 'pending', sent_count: 2 });
    expect(new Date(resent.body.expires_at).getTime()).toBeGreaterThan(Date.now() + 71 * 3_600_000);
    const again = await until(() => smtp.messages[before.mails], 10_000, 'the second e-mail');
    expect(again.to).toEqual([email]);
    expect(tokenIn(again)).not.toBe(tokenIn(mail));
    expectError(await accept(tokenIn(mail)), 404, 'NOT_FOUND');
    expect((await accept(tokenIn(again))).status).toBe(200);
    expectError(await t.http('POST', `/admin/invitations/${inv.id}/resend`, { key: adminA.key }), 409, 'INVITATION_ACCEPTED');
  });

  it('revoked: accepting, resending and revoking again are refused, nothing written', async () => {
    const { inv, mail } = await invite(adminA.key, { email: freshEmail() });
    const revoked = await t.http('DELETE', `/admin/invitations/${inv.id}`, { key: adminA.key });
    expect(revoked.status).toBe(200);
    expect(revoked.body).toMatchObject({ id: inv.id, status: 'revoked' });
    const before = await counts();
    expectError(await accept(tokenIn(mail)), 410, 'INVITATION_REVOKED');
    expectError(await t.http('POST', `/admin/invitations/${inv.id}/resend`, { key: adminA.key }), 410, 'INVITATION_REVOKED');
    expectError(await t.http('DELETE', `/admin/invitations/${inv.id}`, { key: adminA.key }), 410, 'INVITATION_REVOKED');
    expect(await counts()).toEqual(before);
  });
});

describe('tenant isolation', () => {
  it("another tenant's administrator cannot list, resend or revoke an invitation (REST and GraphQL); a plain user cannot invite", async () => {
    const { inv } = await invite(adminA.key, { email: freshEmail() });
    const before = await counts();
    const listB = await t.http('GET', '/admin/invitations?per_page=500', { key: adminB.key });
    expect(listB.status).toBe(200);
    expect(listB.body.items.every((i: { tenant_id: string }) => i.tenant_id === adminB.tenantId)).toBe(true);
    expect(JSON.stringify(listB.body)).not.toContain(inv.id);
    expectError(await t.http('POST', `/admin/invitations/${inv.id}/resend`, { key: adminB.key }), 404, 'NOT_FOUND');
    expectError(await t.http('DELETE', `/admin/invitations/${inv.id}`, { key: adminB.key }), 404, 'NOT_FOUND');
    // X-Tenant-Id of tenant A changes nothing for B's administrator.
    expectError(await t.http('DELETE', `/admin/invitations/${inv.id}`, { key: adminB.key, headers: { 'X-Tenant-Id': adminA.tenantId } }), 404, 'NOT_FOUND');
    const g = await t.gql(
      'query { invitations(per_page: 500) { total items { id tenant_id } } }', {}, { key: adminB.key },
    );
    expect(g.body.data!.invitations.items.map((i: { id: string }) => i.id)).not.toContain(inv.id);
    for (const m of ['revokeInvitation', 'resendInvitation']) {
      const r = await t.gql(`mutation($id: String!) { ${m}(id: $id) { id } }`, { id: inv.id }, { key: adminB.key });
      expect(r.body.errors?.[0]?.extensions?.code, m).toBe('NOT_FOUND');
    }
    expectError(await t.http('POST', '/admin/invitations', { key: plainA.key, json: { email: freshEmail() } }), 403, 'ACCESS_DENIED');
    expectError(await t.http('GET', '/admin/invitations', { key: plainA.key }), 403, 'ACCESS_DENIED');
    expect(await counts()).toEqual(before);
    const mine = await t.gql('query { invitations(per_page: 500) { items { id status } } }', {}, { key: adminA.key });
    expect(mine.body.data!.invitations.items.map((i: { id: string }) => i.id)).toContain(inv.id);
  });
});

describe('permissions (declared once, read by REST and GraphQL)', () => {
  it('over GraphQL: anonymous callers get AUTH_REQUIRED, plain users ACCESS_DENIED, administrators are served; nothing written or mailed when refused', async () => {
    const before = await counts();
    const list = 'query { invitations(per_page: 500) { total } }';
    const create = 'mutation($i: JSON!) { createInvitation(input: $i) { id } }';
    const err = (r: { body: { errors?: { message: string; extensions?: { code?: string } }[] } }) => r.body.errors?.[0];
    expect(err(await t.gql(list, {}, { key: null }))?.extensions?.code).toBe('AUTH_REQUIRED');
    expect(err(await t.gql(create, { i: { email: freshEmail() } }, { key: null }))?.extensions?.code).toBe('AUTH_REQUIRED');
    const denied = err(await t.gql(list, {}, { key: plainA.key }));
    expect(denied).toMatchObject({ message: 'Administrator role required', extensions: { code: 'ACCESS_DENIED' } });
    expect(err(await t.gql(create, { i: { email: freshEmail() } }, { key: plainA.key }))?.extensions?.code).toBe('ACCESS_DENIED');
    expect(err(await t.gql('mutation { revokeInvitation(id: "000000000000000000000000") { id } }', {}, { key: plainA.key }))?.extensions?.code).toBe('ACCESS_DENIED');
    expect(await counts()).toEqual(before);
    const ok = await t.gql(list, {}, { key: adminA.key });
    expect(ok.body.errors).toBeUndefined();
    expect(ok.body.data!.invitations.total).toBeGreaterThanOrEqual(0);
    // Accepting is public: an anonymous caller reaches the service (an unknown token is 404, not 401).
    const acc = await t.gql('mutation($t: String!) { acceptInvitation(token: $t) { user_id } }', { t: 'x'.repeat(43) }, { key: null });
    expect(err(acc)?.extensions?.code).toBe('NOT_FOUND');
  });
});

describe('bad input', () => {
  it('answers the error envelope, writes and mails nothing', async () => {
    const before = await counts();
    for (const json of [{ email: 'not-an-email' }, { email: freshEmail(), roles: ['no-such-role'] }, { email: freshEmail(), extra: 1 }, { email: freshEmail(), roles: [] }, {}]) {
      const res = await t.http('POST', '/admin/invitations', { key: adminA.key, json });
      expect(res.status, JSON.stringify(json)).toBe(422);
      expect(envelope(res).code).toBe('VALIDATION_ERROR');
    }
    expectError(await t.http('POST', '/admin/invitations', { key: adminA.key, json: { email: (await t.http('GET', '/auth/me', { key: plainA.key })).body.email } }), 409, 'CONFLICT');
    expectError(await t.http('POST', '/invitations/accept', { key: null, json: { token: 'short' } }), 422, 'VALIDATION_ERROR');
    expectError(await t.http('POST', '/invitations/accept', { key: null, json: {} }), 422, 'VALIDATION_ERROR');
    expectError(await accept('x'.repeat(43)), 404, 'NOT_FOUND');
    const gqlBad = await t.gql('mutation { acceptInvitation(token: "nope") { user_id } }', {}, { key: null });
    expect(gqlBad.body.errors?.[0]?.extensions?.code).toBe('VALIDATION_ERROR');
    const gqlCreate = await t.gql('mutation($i: JSON!) { createInvitation(input: $i) { id } }', { i: { email: 'nope' } }, { key: adminA.key });
    expect(gqlCreate.body.errors?.[0]?.extensions?.code).toBe('VALIDATION_ERROR');
    expect(await counts()).toEqual(before);
  });

  it('an e-mail the SMTP server refuses: 503 MAIL_UNAVAILABLE, no invitation stored', async () => {
    const before = await counts();
    smtp.refuse(true);
    try {
      const res = await t.http('POST', '/admin/invitations', { key: adminA.key, json: { email: freshEmail() } });
      expect(expectError(res, 503, 'MAIL_UNAVAILABLE').details).toEqual({ setting: 'SMTP_URL' });
    } finally {
      smtp.refuse(false);
    }
    expect(await counts()).toEqual(before);
  });
});

describe('without SMTP_URL, and a replaced template', () => {
  it('outside production the e-mail is written to the log, in the template a plugin registered', async () => {
    const { lines, logger } = captureLogger();
    const custom = definePlugin({
      name: 'custom-invitation-mail',
      dependsOn: ['mailer'],
      setup({ services }) {
        services.get('mailer').registerTemplate<InvitationMail>(INVITATION_TEMPLATE, (d) => ({ subject: `Welcome to ${d.tenant_name}`, text: `Custom: ${d.link}`, html: `<p>Custom</p>` }));
        return {};
      },
    });
    const dev = await buildTestApp({ plugins: [custom, mailerPlugin, invitationsPlugin], logger, config: { INVITATION_LINK_URL: LINK, RATE_LIMIT_ENABLED: 'false' } });
    try {
      const a = await createTenantUser(dev, { tenant: 'Dev', roles: ['admin'] });
      const res = await dev.http('POST', '/admin/invitations', { key: a.key, json: { email: 'logged@example.com' } });
      expect(res.status).toBe(201);
      const line = lines.find((l) => l.mail?.to === 'logged@example.com');
      expect(line?.mail).toMatchObject({ subject: 'Welcome to Dev', text: expect.stringMatching(new RegExp(`^Custom: ${LINK}\\?token=`)) });
    } finally {
      await dev.close();
    }
  });

  it('in production it is refused with 503 MAIL_UNAVAILABLE naming SMTP_URL, nothing written', async () => {
    const prod = await buildTestApp({ plugins: [mailerPlugin, invitationsPlugin], config: { NODE_ENV: 'production', RATE_LIMIT_ENABLED: 'false', METRICS_ENABLED: 'false' } });
    try {
      const res = await prod.http('POST', '/admin/invitations', { key: ADMIN_KEY, json: { email: 'refused@example.com' } });
      const err = expectError(res, 503, 'MAIL_UNAVAILABLE');
      expect(err.message).toContain('SMTP_URL');
      expect(await prod.app.db.conn.collection('invitations').countDocuments()).toBe(0);
    } finally {
      await prod.close();
    }
  });
});
