/**
 * An invitation accepted from its e-mail, in Chromium, as the invitee lives it: a tenant
 * administrator invites an address; the test reads the message off a real SMTP server (smtp-server)
 * and opens the link of its HTML part; the invitee accepts with their name, lands signed in to the
 * inviting tenant on My account (which lists the tenant), adds a passkey with a virtual
 * authenticator, signs out and signs in with it. The same link opened again, and the link of a
 * revoked invitation, say why they no longer work. axe on every step; screenshots kept under
 * test-results/console/.
 */
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { ADMIN_KEY } from '../helpers/app.ts';
import { startSmtp, type ReceivedMail } from '../helpers/smtp.ts';
import { until } from '../realtime/helpers.ts';
import { startConsoleApp, type ConsoleApp } from './console-app.ts';
import { CHROMIUM, screen, signedIn, signOut, watchErrors } from './helpers.ts';

describe.skipIf(!existsSync(CHROMIUM))('an invitation accepted from its e-mail, in Chromium', () => {
  let c: ConsoleApp;
  let smtp: Awaited<ReturnType<typeof startSmtp>>;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let errors: string[];
  let adminKey: string;

  /** Invites `email` as the administrator and returns the e-mail the SMTP server received for it. */
  const invite = async (email: string): Promise<{ id: string; mail: ReceivedMail }> => {
    const before = smtp.messages.length;
    const res = await c.call('POST', '/admin/invitations', adminKey, { email, roles: ['user'] });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const mail = await until(() => smtp.messages.slice(before).find((m) => m.to.includes(email)), 15_000, 'the e-mail');
    return { id: res.body.id as string, mail };
  };
  /** The link a person clicks: the `href` of the HTML part (HTML-escaped there). */
  const linkIn = (mail: ReceivedMail): string => {
    const href = /<a href="([^"]+)">Accept the invitation<\/a>/.exec(mail.html)?.[1];
    expect(href, 'a link in the HTML part').toBeTruthy();
    return href!.replace(/&amp;/g, '&');
  };

  beforeAll(async () => {
    smtp = await startSmtp();
    c = await startConsoleApp((origin) => ({
      WEBAUTHN_RP_ID: 'localhost', WEBAUTHN_ORIGIN: origin,
      SMTP_URL: smtp.smtpUrl, MAIL_FROM: 'Acme console <no-reply@acme.test>', INVITATION_LINK_URL: `${origin}/admin/#/invitation`,
    }));
    const acme = (await c.call('POST', '/admin/tenants', ADMIN_KEY, { name: 'Acme' })).body.id as string;
    adminKey = (await c.mkUser(acme, 'ada@acme.test', ['user', 'admin'])).key;
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true });
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    errors = watchErrors(page);
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await c?.app.close();
    await smtp?.close();
  });

  it('accepted from the e-mail: signed in to the tenant, a passkey added, then a sign-in with it', async () => {
    const { mail } = await invite('nia.new@example.com');
    const link = linkIn(mail);
    // The plain part carries the same link, and both name the tenant.
    expect(mail.text).toContain(link);
    expect(mail.html).toContain('<strong>Acme</strong>');
    expect(link.startsWith(`${c.origin}/admin/#/invitation?token=`)).toBe(true);

    await page.goto(link);
    await page.waitForSelector('h2:text-is("You are invited")');
    await screen(page, 'invitation-open');
    await page.fill('#inv-name', 'Nia New');
    await page.click('button:text-is("Accept the invitation")');
    await signedIn(page);
    // On My account, signed in as the new person, a member of Acme.
    await page.waitForSelector('h2:has-text("My passkeys")');
    expect(await page.textContent('[data-testid=who]')).toContain('nia.new@example.com');
    await expect.poll(() => page.textContent('[data-testid=my-tenant]'), { timeout: 15_000 }).toBe('Acme');
    const me = (await c.call('GET', '/admin/users?per_page=100', adminKey)).body.items.find((u: { email: string }) => u.email === 'nia.new@example.com');
    expect(me).toMatchObject({ name: 'Nia New', roles: ['user'] });
    await screen(page, 'invitation-accepted');

    // A passkey, so the next sign-in needs no link.
    const cdp = await context.newCDPSession(page);
    await cdp.send('WebAuthn.enable');
    await cdp.send('WebAuthn.addVirtualAuthenticator', {
      options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true },
    });
    await page.fill('#pk-device', 'Nia laptop');
    await page.click('button:has-text("Add a passkey")');
    await page.waitForSelector('[data-testid=passkeys] li:has-text("Nia laptop")');
    await signOut(page);
    await page.fill('#pk-email', 'nia.new@example.com');
    await page.click('button:has-text("Sign in with passkey")');
    await signedIn(page);
    expect(await page.textContent('[data-testid=who]')).toContain('nia.new@example.com');
    await signOut(page);

    // The same link again: used, and the page says what to do instead.
    await page.goto('about:blank');
    await page.goto(link);
    await page.click('button:text-is("Accept the invitation")');
    await page.waitForSelector('[data-testid=invitation] [role=alert]:has-text("already accepted")');
    expect(await page.textContent('[data-testid=invitation] [role=alert]')).toContain('INVITATION_ACCEPTED');
    await screen(page, 'invitation-used');
    expect(errors.filter((e) => !/status of 40\d/.test(e))).toEqual([]);
  }, 180_000);

  it('a revoked invitation\'s link says it was withdrawn; nothing is created', async () => {
    const { id, mail } = await invite('rex.revoked@example.com');
    expect((await c.call('DELETE', `/admin/invitations/${id}`, adminKey)).status).toBe(200);
    await page.goto('about:blank');
    await page.goto(linkIn(mail));
    await page.click('button:text-is("Accept the invitation")');
    await page.waitForSelector('[data-testid=invitation] [role=alert]:has-text("withdrawn")');
    await screen(page, 'invitation-revoked');
    const users = (await c.call('GET', '/admin/users?per_page=100', adminKey)).body.items as { email: string }[];
    expect(users.some((u) => u.email === 'rex.revoked@example.com')).toBe(false);
  }, 120_000);
});
