import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

/** One message as the SMTP server received it. */
export interface ReceivedMail {
  from: string;
  to: string[];
  /** The raw message (headers and MIME parts). */
  raw: string;
  /** The text/plain part, quoted-printable decoded. */
  text: string;
  /** The text/html part, quoted-printable decoded. */
  html: string;
}

/** Undo quoted-printable: soft line breaks, then `=XX` bytes (UTF-8). */
const unQp = (s: string): string =>
  Buffer.from(s.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/g, (_m, h: string) => String.fromCharCode(parseInt(h, 16))), 'latin1').toString('utf8');

/** The decoded body of the first MIME part of `type`. */
function part(raw: string, type: string): string {
  const m = new RegExp(`Content-Type: ${type}[^]*?\\r?\\n\\r?\\n([^]*?)(?:\\r?\\n--[^\\r\\n]+)`, 'i').exec(raw);
  if (!m) return '';
  const head = raw.slice(m.index, m.index + m[0].length - m[1]!.length);
  const body = m[1]!;
  if (/Content-Transfer-Encoding: quoted-printable/i.test(head)) return unQp(body);
  if (/Content-Transfer-Encoding: base64/i.test(head)) return Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8');
  return body;
}

/**
 * A real SMTP server on a free local port (smtp-server), no TLS, no authentication: every message
 * it accepts lands in `messages`. `smtpUrl` is the `SMTP_URL` for the app under test.
 */
export async function startSmtp(): Promise<{ smtpUrl: string; messages: ReceivedMail[]; refuse(on: boolean): void; close(): Promise<void> }> {
  const messages: ReceivedMail[] = [];
  let refusing = false;
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        if (refusing) return callback(Object.assign(new Error('Mailbox unavailable'), { responseCode: 550 }));
        const raw = Buffer.concat(chunks).toString('utf8');
        messages.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          raw, text: part(raw, 'text/plain'), html: part(raw, 'text/html'),
        });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.server.address() as AddressInfo;
  return {
    smtpUrl: `smtp://127.0.0.1:${port}`,
    messages,
    refuse: (on) => { refusing = on; },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The token of the invitation link in a received message's plain text. */
export const tokenIn = (mail: ReceivedMail): string => {
  const m = /[?&]token=([A-Za-z0-9_-]+)/.exec(mail.text);
  if (!m) throw new Error(`no invitation link in: ${mail.text}`);
  return m[1]!;
};
