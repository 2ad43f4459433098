import { definePlugin } from '../../core/plugin.ts';
import { MailerService, mailErrorCodes } from './service.ts';

export { MailerService } from './service.ts';
export type { MailTemplate, RenderedMail } from './schemas.ts';

declare module '../../core/services.ts' {
  interface Services {
    /** E-mail through `SMTP_URL` (nodemailer), from named templates that plugins may replace. */
    mailer: MailerService;
  }
}

/**
 * E-mail: the `mailer` service. Sends through `SMTP_URL`; without it, writes e-mails to the log
 * outside production and refuses them in production. Templates are registered by name
 * (`registerTemplate`); a plugin replaces one by registering the same name.
 */
export const mailerPlugin = definePlugin({
  name: 'mailer',
  setup({ config, log, services }) {
    const mailer = new MailerService({ smtpUrl: config.SMTP_URL, from: config.MAIL_FROM, production: config.NODE_ENV === 'production' }, log);
    if (!config.SMTP_URL && config.NODE_ENV === 'production') log.warn('SMTP_URL is not set: e-mails (invitations) are refused until it is');
    services.provide('mailer', mailer);
    return { errorCodes: mailErrorCodes, close: () => mailer.close() };
  },
});

export default mailerPlugin;
