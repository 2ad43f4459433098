/**
 * The page an invitation's link opens (`#/invitation?token=…`, the `INVITATION_LINK_URL`): the
 * invitee accepts, with the name others will see, and is signed in to the inviting tenant with the
 * token the server answers; My account then offers to add a passkey for the next sign-in. A link
 * already used, expired, revoked or replaced by a newer one says so and points to the way on.
 */
import { useState } from 'preact/hooks';
import { ApiError, run, session } from './api.ts';
import { AcceptInvitation as AcceptInvitationDoc } from './graphql.ts';
import { start } from './signin.tsx';
import { Busy, ErrorBox, toast } from './ui.tsx';

/** The link's token: after the hash route (`#/invitation?token=…`) or in the query. */
export const invitationToken = (): string | null =>
  new URLSearchParams(location.hash.split('?')[1] ?? '').get('token') ?? new URLSearchParams(location.search).get('token');

/** What each refusal means to the person holding the link. */
const WHY: Record<string, string> = {
  INVITATION_ACCEPTED: 'This invitation was already accepted: each link works once. Sign in instead.',
  INVITATION_EXPIRED: 'This invitation has expired. Ask the administrator who invited you to send it again.',
  INVITATION_REVOKED: 'This invitation was withdrawn. Ask the administrator who invited you for a new one.',
  NOT_FOUND: 'This link does not work any more: a newer invitation may have replaced it. Use the newest e-mail, or ask for a new one.',
  CONFLICT: 'You are already a member of this tenant. Sign in instead.',
};

export function AcceptInvitation() {
  const token = invitationToken();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const accept = (e: SubmitEvent) => {
    e.preventDefault();
    const raw = new FormData(e.currentTarget as HTMLFormElement).get('name');
    const name = typeof raw === 'string' ? raw.trim() : '';
    setBusy(true);
    setError(null);
    void (async () => {
      try {
        // Signed in already: the invitation joins this person (the server checks the e-mail).
        const { acceptInvitation } = await run(AcceptInvitationDoc, { token: token!, name: name || null }, session.value ? { token: session.value.token } : {});
        location.hash = '#/account';
        await start(acceptInvitation.token, acceptInvitation.expires_in);
        toast('Welcome: you are a member now. Add a passkey to sign in next time.');
      } catch (err) {
        setError(err instanceof ApiError && WHY[err.code] ? new ApiError(WHY[err.code]!, err.code, err.status, err.details, err.requestId) : err);
      } finally {
        setBusy(false);
      }
    })();
  };
  return (
    <main id="main" class="signin">
      <h1>Admin console</h1>
      <section aria-labelledby="inv-h" data-testid="invitation">
        <h2 id="inv-h">You are invited</h2>
        {token ? (
          <form onSubmit={accept} aria-labelledby="inv-h">
            <p>Accept to join the tenant named in your e-mail, with the roles it lists. You are signed in at once.</p>
            <label for="inv-name">Your name</label>
            <input id="inv-name" name="name" autoComplete="name" aria-describedby="inv-name-hint" />
            <p id="inv-name-hint" class="muted">Optional: others in the tenant see it. Without it, the start of your e-mail address is used.</p>
            <button type="submit" disabled={busy}>Accept the invitation</button>
          </form>
        ) : (
          <p role="alert">This link has no invitation in it. Open the link from your e-mail again.</p>
        )}
        <Busy label="Accepting…" />
        <ErrorBox error={error} />
        <p><a href="#/">Go to the sign-in page</a></p>
      </section>
    </main>
  );
}
