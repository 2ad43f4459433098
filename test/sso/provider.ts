/**
 * A real OpenID provider for the SSO tests (oidc-provider), on 127.0.0.1, and a browser stand-in
 * that signs a person in through its login form. The provider's clock can be set back (an ID token
 * already expired when it is issued) by running it in a child process with `clockOffsetMs`.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import Provider from 'oidc-provider';

export interface Account {
  sub: string;
  email: string;
  email_verified?: boolean;
  /** Microsoft Entra's optional claim: the e-mail's domain owner is verified. */
  xms_edov?: boolean;
  name?: string;
  groups?: string[];
}

export interface ProviderOptions {
  accounts: Account[];
  clients: { client_id: string; client_secret: string; redirect_uris: string[] }[];
}

export interface TestProvider {
  issuer: string;
  /** Change what an account's claims say (e.g. its groups) for the next sign-in. */
  setAccount(a: Account): void;
  close(): Promise<void>;
}

/** Starts the provider in this process. */
export async function startProvider(opts: ProviderOptions): Promise<TestProvider> {
  const accounts = new Map(opts.accounts.map((a) => [a.sub, a]));
  const server: Server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const op = configure(issuer, opts.clients, (id) => accounts.get(id));
  server.on('request', op.callback());
  return {
    issuer,
    setAccount: (a) => accounts.set(a.sub, a),
    close: () => new Promise((r) => server.close(() => r())),
  };
}

/** Starts the provider in a child process whose clock runs `clockOffsetMs` off this one's. */
export async function startProviderProcess(opts: ProviderOptions & { clockOffsetMs: number }): Promise<TestProvider> {
  const child: ChildProcess = fork(fileURLToPath(new URL('./provider-process.ts', import.meta.url)), [], {
    execArgv: ['--import', 'tsx'], env: { ...process.env, OP_OPTIONS: JSON.stringify(opts) }, stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const issuer = await new Promise<string>((resolve, reject) => {
    child.once('message', (m) => resolve(String((m as { issuer: string }).issuer)));
    child.once('exit', (code) => reject(new Error(`provider process exited with ${code}`)));
  });
  return {
    issuer,
    setAccount: () => {
      throw new Error('not supported in a child process');
    },
    close: async () => {
      child.kill();
      await new Promise((r) => child.once('exit', r));
    },
  };
}

export function configure(issuer: string, clients: ProviderOptions['clients'], account: (id: string) => Account | undefined): Provider {
  const op = new Provider(issuer, {
    clients: clients.map((c) => ({ ...c, grant_types: ['authorization_code'], response_types: ['code'] })),
    findAccount: (_ctx, id) => {
      const a = account(id);
      return a ? { accountId: id, claims: () => ({ ...a, sub: id }) } : undefined;
    },
    claims: { openid: ['sub'], email: ['email', 'email_verified', 'xms_edov'], profile: ['name'], groups: ['groups'] },
    scopes: ['openid', 'email', 'profile', 'groups'],
    pkce: { required: () => true },
    // No consent screen: the test's person grants whatever the client asks.
    loadExistingGrant: async (ctx) => {
      const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client!.clientId, accountId: ctx.oidc.session!.accountId! });
      grant.addOIDCScope('openid email profile groups');
      await grant.save();
      return grant;
    },
  });
  return op;
}

/** A minimal cookie-keeping client, enough for the provider's login form. */
export class Browser {
  private readonly jar = new Map<string, string>();

  async get(url: string | URL): Promise<Response> {
    return this.send(url, {});
  }

  async post(url: string | URL, form: Record<string, string>): Promise<Response> {
    return this.send(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(form).toString() });
  }

  private async send(url: string | URL, init: RequestInit): Promise<Response> {
    const headers = { ...(init.headers as Record<string, string> | undefined), cookie: [...this.jar].map(([k, v]) => `${k}=${v}`).join('; ') };
    const res = await fetch(url, { ...init, headers, redirect: 'manual' });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const i = pair!.indexOf('=');
      this.jar.set(pair!.slice(0, i), pair!.slice(i + 1));
    }
    return res;
  }
}

/**
 * Signs `login` in at the provider, starting from the provider's authorization URL, and answers
 * the URL the provider sends the browser back to (our callback, with `code` and `state`).
 */
export async function signInAtProvider(authorizationUrl: string, login: string, browser = new Browser()): Promise<URL> {
  let res = await browser.get(authorizationUrl);
  let location = new URL(res.headers.get('location')!, authorizationUrl);
  for (let i = 0; i < 6 && location.pathname.startsWith('/interaction/'); i++) {
    res = await browser.post(location, { prompt: 'login', login, password: 'any' });
    location = new URL(res.headers.get('location')!, location);
    res = await browser.get(location);
    location = new URL(res.headers.get('location')!, location);
  }
  return location;
}
