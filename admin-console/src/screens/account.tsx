/**
 * My account: who I am, my tenants (switch to another with the passkey: each credential acts in one
 * tenant), and my passkeys (add one with WebAuthn, remove one).
 */
import { useState } from 'preact/hooks';
import { run, session } from '../api.ts';
import { DeletePasskey, MyMemberships, MyPasskeys, PasskeyLogin, PasskeyLoginOptions, PasskeyRegistrationOptions, RegisterPasskey } from '../graphql.ts';
import { assertionJson, attestationJson, creationOptions, requestOptions } from '../webauthn.ts';
import { start } from '../signin.tsx';
import { Empty, ErrorBox, Time, Loading, Notice, useAsync } from '../ui.tsx';

export function AccountScreen() {
  const u = session.value!.user;
  const passkeys = useAsync(() => run(MyPasskeys).then((r) => r.me?.passkeys ?? []), []);
  const tenants = useAsync(() => run(MyMemberships).then((r) => r.myMemberships), []);
  const switchTo = async (tenantId: string) => {
    setError(null);
    try {
      const { passkeyLoginOptions } = await run(PasskeyLoginOptions, { email: u.email });
      const cred = (await navigator.credentials.get({ publicKey: requestOptions(passkeyLoginOptions) })) as PublicKeyCredential | null;
      if (!cred) throw new Error('No passkey was chosen');
      const { passkeyLogin } = await run(PasskeyLogin, { input: { email: u.email, ...assertionJson(cred) }, tenant: tenantId });
      await start(passkeyLogin.token, passkeyLogin.expires_in);
      location.hash = '#/overview';
    } catch (err) {
      setError(err);
    }
  };
  const [device, setDevice] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState<string | null>(null);
  // Which passkey action is under way ('add' or a credential id): its button says so meanwhile.
  const [busy, setBusy] = useState<string | null>(null);
  const add = async (e: Event) => {
    e.preventDefault();
    if (busy) return;
    setError(null);
    setDone(null);
    setBusy('add');
    try {
      const { passkeyRegistrationOptions } = await run(PasskeyRegistrationOptions);
      const cred = (await navigator.credentials.create({ publicKey: creationOptions(passkeyRegistrationOptions) })) as PublicKeyCredential | null;
      if (!cred) throw new Error('No passkey was created');
      await run(RegisterPasskey, { input: { ...attestationJson(cred), device_name: device || 'Passkey' } });
      setDone('Passkey added: you can now sign in with it.');
      setDevice('');
      passkeys.reload();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(null);
    }
  };
  const remove = async (id: string, name: string) => {
    if (busy) return;
    setError(null);
    setDone(null);
    setBusy(id);
    try {
      await run(DeletePasskey, { id });
      setDone(`Passkey ${name} removed: it no longer signs you in.`);
      passkeys.reload();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(null);
    }
  };
  return (
    <>
      <h1>My account</h1>
      <dl class="detail">
        <div><dt>Email</dt><dd>{u.email}</dd></div>
        <div><dt>Name</dt><dd>{u.name}</dd></div>
        <div><dt>Tenant</dt><dd data-testid="my-tenant">{tenants.data?.find((m) => m.tenant_id === u.tenant_id)?.tenant_name ?? u.tenant_id}</dd></div>
        <div><dt>Roles</dt><dd>{u.roles.join(', ')}</dd></div>
        <div><dt>Features</dt><dd>{u.features.join(', ') || 'none'}</dd></div>
      </dl>
      {(tenants.data?.length ?? 0) > 1 && (
        <section aria-labelledby="h-tenants">
          <h2 id="h-tenants">My tenants</h2>
          <ul data-testid="memberships">
            {tenants.data!.map((m) => (
              <li key={m.user_id}>
                {m.tenant_name ?? m.tenant_id} ({m.roles.join(', ')}){' '}
                {m.tenant_id === u.tenant_id
                  ? <strong>this session</strong>
                  : <button type="button" onClick={() => void switchTo(m.tenant_id)}>Switch to {m.tenant_name ?? m.tenant_id}</button>}
              </li>
            ))}
          </ul>
          <p class="muted">Switching asks for your passkey: each sign-in acts in one tenant.</p>
        </section>
      )}
      <section aria-labelledby="h-pk">
        <h2 id="h-pk">My passkeys</h2>
        <Loading when={passkeys.loading} />
        <ErrorBox error={passkeys.error} />
        <ErrorBox error={error} />
        {done && <Notice>{done}</Notice>}
        {passkeys.data?.length === 0 && <Empty>No passkeys yet. Add one with the form below to sign in with this device instead of an API key.</Empty>}
        {!!passkeys.data?.length && <ul data-testid="passkeys">
          {passkeys.data.map((p) => (
            <li key={p.credential_id}>
              {p.device_name}, added <Time v={p.registered_at} />{p.last_used_at && <>, last used <Time v={p.last_used_at} /></>}{' '}
              <button type="button" aria-disabled={busy ? 'true' : undefined} onClick={() => void remove(p.credential_id, p.device_name)}>{busy === p.credential_id ? 'Removing…' : `Remove ${p.device_name}`}</button>
            </li>
          ))}
        </ul>}
        <form class="inline-form" onSubmit={add}>
          <label for="pk-device">Device name</label>
          <input id="pk-device" value={device} onInput={(e) => setDevice(e.currentTarget.value)} />
          <button type="submit" aria-disabled={busy ? 'true' : undefined}>{busy === 'add' ? 'Adding…' : 'Add a passkey'}</button>
        </form>
      </section>
    </>
  );
}
