import { Writable } from 'node:stream';
import { pino } from 'pino';
import type { TestApp } from '../helpers/app.ts';
import type { SoftAuthenticator} from './authenticator.ts';
import { type CeremonyOverrides } from './authenticator.ts';

export const ORIGIN = 'http://localhost:3000';
export const PASSKEY_CONFIG = { WEBAUTHN_RP_ID: 'localhost', WEBAUTHN_RP_NAME: 'Test RP', WEBAUTHN_ORIGIN: `${ORIGIN},https://admin.example.test` };

/** A pino logger whose lines (parsed) land in `lines`. */
export function captureLogger(level = 'info') {
  const lines: Record<string, any>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(l));
      cb();
    },
  });
  return { lines, logger: pino({ level }, stream) };
}

/** register/options then register, as the browser would; returns the register answer. */
export async function registerPasskey(t: TestApp, key: string, auth: SoftAuthenticator, o: CeremonyOverrides & { device_name?: string; transports?: string[] } = {}) {
  const opts = await t.http('POST', '/auth/webauthn/register/options', { key });
  if (opts.status !== 200) throw new Error(`register/options: ${opts.status} ${JSON.stringify(opts.body)}`);
  return t.http('POST', '/auth/webauthn/register', { key, json: auth.makeCredential(opts.body.challenge, o) });
}

/** authenticate/options then authenticate; returns the authenticate answer. */
export async function loginWith(t: TestApp, email: string, auth: SoftAuthenticator, o: CeremonyOverrides = {}, headers: Record<string, string> = {}) {
  const opts = await t.http('POST', '/auth/webauthn/authenticate/options', { key: null, json: { email }, headers });
  if (opts.status !== 200) throw new Error(`authenticate/options: ${opts.status} ${JSON.stringify(opts.body)}`);
  return t.http('POST', '/auth/webauthn/authenticate', { key: null, headers, json: { email, ...auth.getAssertion(opts.body.challenge, o) } });
}
