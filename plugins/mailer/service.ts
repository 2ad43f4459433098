/**
 * The `mailer` service: renders a named template and sends it through nodemailer (SMTP). Templates
 * are plain text and HTML; a plugin replaces one by registering it under the same name. No Koa or
 * GraphQL here.
 */
import { createTransport, type Transporter } from 'nodemailer';
import { AppError, type ErrorCodes } from '../../core/errors.ts';
import type { Logger } from '../../core/logger.ts';
import { renderedMail, type MailTemplate } from './schemas.ts';


/** What the mailer needs from the configuration. */
export interface MailerSettings {
  /** `SMTP_URL`: unset means no SMTP server. */
  smtpUrl: string | undefined;
  /** `MAIL_FROM`. */
  from: string;
  /** Production refuses to send without an SMTP server; elsewhere the e-mail goes to the log. */
  production: boolean;
}

/** 503 `MAIL_UNAVAILABLE`, naming the setting. */
const unavailable = (message: string) => new AppError(503, 'MAIL_UNAVAILABLE', message, { setting: 'SMTP_URL' });

/** The mailer's codes in the error catalogue. */
export const mailErrorCodes: ErrorCodes = {
  MAIL_UNAVAILABLE: {
    example: unavailable('E-mail cannot be sent: set SMTP_URL'),
    description: 'An e-mail (an invitation) in production without `SMTP_URL`, or the mail server refused it.',
  },
};

export class MailerService {
  private readonly templates = new Map<string, { render: MailTemplate; builtIn: boolean }>();
  private readonly transport: Transporter | null;

  constructor(private readonly settings: MailerSettings, private readonly log: Logger) {
    this.transport = settings.smtpUrl ? createTransport(settings.smtpUrl) : null;
  }

  /**
   * Register (or replace) template `name`. A plugin's own defaults pass `{ builtIn: true }`: they
   * never replace a template registered by another plugin, whichever was set up first.
   * @example mailer.registerTemplate('invitation', (d) => ({ subject: 'Join us', text: `${d.link}`, html: `<a href="${d.link}">Join</a>` }))
   */
  registerTemplate<D>(name: string, render: MailTemplate<D>, opts: { builtIn?: boolean } = {}): void {
    if (opts.builtIn && this.templates.has(name)) return;
    this.templates.set(name, { render: render as MailTemplate, builtIn: !!opts.builtIn });
  }

  /** Whether an e-mail can go out now: with `SMTP_URL`, or outside production (to the log). */
  get available(): boolean {
    return !!this.transport || !this.settings.production;
  }

  /** @throws AppError 503 `MAIL_UNAVAILABLE` in production without `SMTP_URL` (check before writing anything) */
  assertAvailable(): void {
    if (!this.available) throw unavailable('E-mail cannot be sent: set SMTP_URL (the SMTP server e-mail goes out through)');
  }

  /**
   * Render template `name` with `data` and send it to `to`. Without `SMTP_URL` (outside production)
   * the e-mail is written to the log instead, link included: development only.
   * @throws AppError 503 `MAIL_UNAVAILABLE` without an SMTP server in production, or when the server refuses the e-mail
   */
  async send<D>(to: string, name: string, data: D): Promise<void> {
    const template = this.templates.get(name);
    if (!template) throw new Error(`mailer: no template "${name}" is registered`);
    // A replaced template answering something else is a bug of its plugin: fail loudly, send nothing.
    const mail = renderedMail.parse(template.render(data as Record<string, unknown>));
    this.assertAvailable();
    if (!this.transport) {
      this.log.info({ mail: { to, template: name, subject: mail.subject, text: mail.text } }, 'e-mail not sent (no SMTP_URL): written to the log instead');
      return;
    }
    try {
      await this.transport.sendMail({ from: this.settings.from, to, subject: mail.subject, text: mail.text, html: mail.html });
    } catch (err) {
      this.log.warn({ err, template: name }, 'the SMTP server did not take the e-mail');
      throw unavailable('The e-mail could not be sent: the SMTP server (SMTP_URL) did not take it; try again later');
    }
  }

  close(): void {
    this.transport?.close();
  }
}
