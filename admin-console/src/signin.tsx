/**
 * Sign-in: an API key (exchanged for a bearer token), a passkey through WebAuthn, or the tenant's
 * single sign-on (`/admin?tenant=<id>` lists its providers); the token stays in memory. A person with several memberships picks the tenant, then confirms with the passkey again.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, expiresAtOf, run, session, signedOutReason } from './api.ts';
import { ExchangeSsoCode, IssueToken, Me, PasskeyLogin, PasskeyLoginOptions, SsoSignInOptions } from './graphql.ts';
import { Busy, ErrorBox } from './ui.tsx';
import { assertionJson, requestOptions } from './webauthn.ts';

/** Begin a session with a fresh token (sign-in, or a switch to another of the person's tenants). */
export async function start(token: string, expiresIn: number) {
  // Counted from the exchange's answer, not from the `me` that follows.
  const expiresAt = expiresAtOf(expiresIn);
  const { me } = await run(Me, {}, { token });
  if (!me) throw new ApiError('Signed in, but the server does not know the user', 'AUTH_REQUIRED', 401, {}, null);
  signedOutReason.value = null;
  session.value = { token, user: me, expiresAt };
  if (!location.hash) location.hash = '#/overview';
}

const fieldOf = (form: HTMLFormElement, name: string): string => {
  const v = new FormData(form).get(name);
  return typeof v === 'string' ? v : '';
};

export function SignIn({ reason }: { reason: string | null }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  // After TENANT_REQUIRED: the person's tenants, and the e-mail the passkey was asked for.
  const [choice, setChoice] = useState<{ email: string; tenants: { id: string; name: string | null }[] } | null>(null);
  const keyInput = useRef<HTMLInputElement>(null);
  const [providers, setProviders] = useState<{ name: string; login_url: string }[]>([]);
  // The first thing to type is the key (also after an expired session: the notice is announced as a
  // status), unless a field already has the focus: this runs just after the form renders, and must
  // not move someone who was quicker (and their typing) from the field they chose.
  useEffect(() => {
    const active = document.activeElement;
    if (!active || active === document.body) keyInput.current?.focus();
  }, []);
  const attempt = async (fn: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    try {
      await fn();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  useEffect(() => {
    const tenant = new URLSearchParams(location.search).get('tenant');
    if (tenant && /^[0-9a-f]{24}$/.test(tenant)) void run(SsoSignInOptions, { tenant }, {}).then((r) => setProviders(r.ssoSignInOptions), () => setProviders([]));
    // Back from a single sign-on: a one-time code in the fragment, taken out of the address bar and exchanged once.
    const code = new URLSearchParams(location.hash.slice(1)).get('sso_code');
    if (!code) return;
    history.replaceState(null, '', location.pathname + location.search);
    void attempt(async () => {
      const { exchangeSsoCode } = await run(ExchangeSsoCode, { code }, {});
      await start(exchangeSsoCode.token, exchangeSsoCode.expires_in);
    });
  }, []);
  // The fields are read from the form when it is sent, not kept in state: a render that happens
  // while the user types (a late answer, a notice) can then never reset what was typed.
  const withKey = (e: SubmitEvent) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const key = fieldOf(form, 'api_key').trim();
    void attempt(async () => {
      const { issueToken } = await run(IssueToken, {}, { apiKey: key });
      form.reset();
      await start(issueToken.token, issueToken.expires_in);
    });
  };
  const passkey = (email: string, tenant: string | null) =>
    attempt(async () => {
      const { passkeyLoginOptions } = await run(PasskeyLoginOptions, { email });
      const credential = (await navigator.credentials.get({ publicKey: requestOptions(passkeyLoginOptions) })) as PublicKeyCredential | null;
      if (!credential) throw new Error('No passkey was chosen');
      try {
        const { passkeyLogin } = await run(PasskeyLogin, { input: { email, ...assertionJson(credential) }, tenant });
        setChoice(null);
        await start(passkeyLogin.token, passkeyLogin.expires_in);
      } catch (err) {
        if (!(err instanceof ApiError && err.code === 'TENANT_REQUIRED')) throw err;
        setChoice({ email, tenants: (err.details.tenants as { id: string; name: string | null }[] | undefined) ?? [] });
      }
    });
  const withPasskey = (e: SubmitEvent) => {
    e.preventDefault();
    void passkey(fieldOf(e.currentTarget as HTMLFormElement, 'email'), null);
  };
  return (
    <main id="main" class="signin">
      <h1>Admin console</h1>
      {reason && <p class="notice" role="alert" id="signin-reason" data-testid="signin-reason">{reason}</p>}
      <form onSubmit={withKey} aria-labelledby="key-h">
        <h2 id="key-h">Sign in with an API key</h2>
        <label for="api-key">API key</label>
        <input id="api-key" ref={keyInput} type="password" autoComplete="off" name="api_key" required aria-describedby={reason ? 'signin-reason' : undefined} />
        <button type="submit" disabled={busy}>Sign in</button>
      </form>
      <form onSubmit={withPasskey} aria-labelledby="pk-h">
        <h2 id="pk-h">Sign in with a passkey</h2>
        <label for="pk-email">Email</label>
        <input id="pk-email" type="email" autoComplete="username webauthn" name="email" required />
        <button type="submit" disabled={busy}>Sign in with passkey</button>
      </form>
      {choice && (
        <section aria-labelledby="tenant-h" data-testid="tenant-choice">
          <h2 id="tenant-h">Which tenant?</h2>
          <p>You are a member of several tenants. Choose one, then confirm with your passkey again.</p>
          <ul>
            {choice.tenants.map((t) => (
              <li key={t.id}>
                <button type="button" disabled={busy} onClick={() => void passkey(choice.email, t.id)}>{t.name ?? t.id}</button>
              </li>
            ))}
          </ul>
        </section>
      )}
      {providers.length > 0 && (
        <nav aria-labelledby="sso-h">
          <h2 id="sso-h">Single sign-on</h2>
          {providers.map((p) => (
            <a key={p.name} class="button" href={`${p.login_url}?return_to=console`}>Sign in with {p.name}</a>
          ))}
        </nav>
      )}
      <Busy label="Signing in…" />
      <ErrorBox error={error} />
      <p class="muted">The token is kept in this tab's memory only: reloading the page signs you out.</p>
    </main>
  );
}
