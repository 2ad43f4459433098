/**
 * Identity: tenants (system administrators create them) and users, each a page at a time
 * (`tenantsPage`, `usersPage`); per user: disable/enable, roles and features (a dialog), a new API
 * key (a dialog that shows the key once), delete (confirmed in a dialog); API keys (revoke).
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, isSystem, run, session } from '../api.ts';
import { ApiKeys, CreateApiKey, CreateTenant, CreateUser, DeleteUser, RevokeApiKey, RolesPage, Tenants, TenantsPage, UpdateUser, UsersPage, type ResultOf } from '../graphql.ts';
import { rootFields } from '../caps.ts';
import { resourceTypes } from '../resources.ts';
import { ConfirmDialog, Dialog, Empty, ErrorBox, Loading, Pager, ShortId, Time, toast, useAction, useAsync } from '../ui.tsx';

type U = ResultOf<typeof UsersPage>['usersPage']['items'][number];
const TENANTS_PER_PAGE = 10;
const USERS_PER_PAGE = 20;
const KEYS_PER_PAGE = 20;
const ROLES = ['user', 'admin'];

const list = (s: string) => s.split(',').map((x) => x.trim()).filter(Boolean);

/** The server's VALIDATION_ERROR messages about `field` (any `loc` naming it, `features.0` included). */
const issuesOf = (error: unknown, field: string): string =>
  error instanceof ApiError && error.code === 'VALIDATION_ERROR' ? error.issues.filter((i) => i.loc.includes(field)).map((i) => i.msg).join('; ') : '';

export function IdentityScreen() {
  const system = isSystem(session.value?.user);
  const [tenantPage, setTenantPage] = useState(1);
  const [userPage, setUserPage] = useState(1);
  const tenants = useAsync(() => run(TenantsPage, { page: tenantPage, per_page: TENANTS_PER_PAGE }).then((r) => r.tenantsPage), [tenantPage]);
  // The new-user form's tenant choice (system administrators only): every tenant, up to 500.
  const allTenants = useAsync(() => (system ? run(Tenants).then((r) => r.tenants) : Promise.resolve([])), [system]);
  const users = useAsync(() => run(UsersPage, { page: userPage, per_page: USERS_PER_PAGE }).then((r) => r.usersPage), [userPage]);
  const [keyPage, setKeyPage] = useState(1);
  // One more than a page: whether a next page exists (the list has no total).
  const keys = useAsync(() => run(ApiKeys, { page: keyPage, per_page: KEYS_PER_PAGE + 1 }).then((r) => r.apiKeys), [keyPage]);
  const me = session.value?.user.id;
  const { error, act } = useAction();
  const [dialog, setDialog] = useState<{ kind: 'access' | 'key' | 'delete'; user: U } | null>(null);
  const [tenantName, setTenantName] = useState('');
  const [nu, setNu] = useState({ email: '', name: '', tenant_id: '', roles: 'user', features: '' });
  const close = () => setDialog(null);
  return (
    <>
      <h1>Identity</h1>
      <ErrorBox error={error} />
      <section aria-labelledby="h-tenants">
        <h2 id="h-tenants">Tenants</h2>
        <Loading when={tenants.loading} />
        <ErrorBox error={tenants.error} />
        <ul data-testid="tenants">
          {(tenants.data?.items ?? []).map((t) => <li key={t.id}>{t.name} <ShortId id={t.id} label="tenant id" />{t.is_system ? ' (system)' : ''}</li>)}
        </ul>
        {tenants.data && <Pager label="Pages of tenants" page={tenants.data.page} totalPages={tenants.data.total_pages} onPage={setTenantPage} />}
        {system && (
          <form class="inline-form" onSubmit={(e) => { e.preventDefault(); void act(() => run(CreateTenant, { name: tenantName }).then(() => setTenantName('')), tenants.reload, allTenants.reload); }}>
            <label for="t-name">New tenant name</label>
            <input id="t-name" required value={tenantName} onInput={(e) => setTenantName(e.currentTarget.value)} />
            <button type="submit">Create tenant</button>
          </form>
        )}
      </section>
      <section aria-labelledby="h-users">
        <h2 id="h-users">Users</h2>
        <Loading when={users.loading} />
        <ErrorBox error={users.error} />
        {users.data && <p class="muted" data-testid="users-total">{users.data.total} user(s)</p>}
        <div class="scroll">
          <table data-testid="users">
            <caption class="sr-only">Users</caption>
            <thead><tr><th scope="col">Email</th><th scope="col">Roles</th><th scope="col">Features</th><th scope="col">Active</th><th scope="col">Actions</th></tr></thead>
            <tbody>
              {(users.data?.items ?? []).map((u) => (
                <tr key={u.id}>
                  <td>{u.email}<br /><small class="muted">{u.name} · tenant …{u.tenant_id.slice(-6)}</small></td>
                  <td>{u.roles.join(', ')}</td>
                  <td>{u.features.join(', ')}</td>
                  <td>{u.is_active ? 'yes' : 'disabled'}</td>
                  <td>
                    <div class="actions">
                      {/* The server refuses these to the signed-in user on their own row, and on a tenant's last administrator. */}
                      {u.id !== me && !u.last_admin && (
                        <button type="button" onClick={() => act(() => run(UpdateUser, { id: u.id, input: { is_active: !u.is_active } }), users.reload, () => toast(`${u.email} ${u.is_active ? 'disabled' : 'enabled'}`))}>
                          {u.is_active ? 'Disable' : 'Enable'}<span class="sr-only"> {u.email}</span>
                        </button>
                      )}
                      <button type="button" onClick={() => setDialog({ kind: 'access', user: u })}>Roles and features<span class="sr-only"> of {u.email}</span>…</button>
                      <button type="button" onClick={() => setDialog({ kind: 'key', user: u })}>New API key<span class="sr-only"> for {u.email}</span>…</button>
                      {u.id !== me && !u.last_admin && <button type="button" onClick={() => setDialog({ kind: 'delete', user: u })}>Delete<span class="sr-only"> {u.email}</span>…</button>}
                      {(u.id === me || u.last_admin) && <small class="muted" data-testid="kept">{u.id === me ? 'you' : 'last administrator of its tenant'}</small>}
                    </div>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        {users.data && <Pager label="Pages of users" page={users.data.page} totalPages={users.data.total_pages} onPage={setUserPage} />}
        <form class="filters" aria-label="New user" onSubmit={(e) => {
          e.preventDefault();
          void act(() => run(CreateUser, { input: { email: nu.email, name: nu.name, roles: list(nu.roles), features: list(nu.features), ...(nu.tenant_id ? { tenant_id: nu.tenant_id } : {}) } }).then(() => setNu({ ...nu, email: '', name: '' })), users.reload);
        }}>
          <h3>New user</h3>
          <div class="row"><label for="u-email">Email</label><input id="u-email" type="email" required value={nu.email} onInput={(e) => setNu({ ...nu, email: e.currentTarget.value })} /></div>
          <div class="row"><label for="u-name">Name</label><input id="u-name" required value={nu.name} onInput={(e) => setNu({ ...nu, name: e.currentTarget.value })} /></div>
          {system && (
            <div class="row">
              <label for="u-tenant">Tenant</label>
              <select id="u-tenant" value={nu.tenant_id} onChange={(e) => setNu({ ...nu, tenant_id: e.currentTarget.value })}>
                <option value="">(my tenant)</option>
                {(allTenants.data ?? []).map((t) => <option key={t.id} value={t.id}>{t.name}</option>)}
              </select>
            </div>
          )}
          <div class="row"><label for="u-roles">Roles (user, admin)</label><input id="u-roles" value={nu.roles} onInput={(e) => setNu({ ...nu, roles: e.currentTarget.value })} /></div>
          <div class="row"><label for="u-features">Features (comma-separated)</label><input id="u-features" value={nu.features} onInput={(e) => setNu({ ...nu, features: e.currentTarget.value })} /></div>
          <button type="submit">Create user</button>
        </form>
      </section>
      <section aria-labelledby="h-keys">
        <h2 id="h-keys">API keys</h2>
        <p class="muted">Create a key with "New API key…" in the user's row.</p>
        <Loading when={keys.loading} />
        <ErrorBox error={keys.error} />
        <div class="scroll">
          <table data-testid="keys">
            <caption class="sr-only">API keys</caption>
            <thead><tr><th scope="col">Name</th><th scope="col">Owner</th><th scope="col">Prefix</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">Actions</th></tr></thead>
            <tbody>
              {(keys.data ?? []).slice(0, KEYS_PER_PAGE).map((k) => (
                <tr key={k.id}>
                  <td>{k.name}</td>
                  <td>{k.user_email ?? <ShortId id={k.user_id} label="user id" />}</td>
                  <td><code>{k.prefix}…</code></td>
                  <td><Time v={k.created_at} /></td>
                  <td>{k.last_used_at ? <Time v={k.last_used_at} /> : 'never'}</td>
                  <td><button type="button" onClick={() => act(() => run(RevokeApiKey, { id: k.id }), keys.reload, () => toast(`Key ${k.name} revoked`))}>Revoke {k.name}</button></td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        {keys.data && !keys.data.length && <Empty>No API keys. Create one with "New API key…" in a user's row.</Empty>}
        {keys.data && <Pager label="Pages of API keys" page={keyPage} totalPages={keys.data.length > KEYS_PER_PAGE ? keyPage + 1 : keyPage} onPage={setKeyPage} />}
      </section>
      {dialog?.kind === 'access' && <AccessDialog user={dialog.user} onClose={close} onSaved={users.reload} />}
      {dialog?.kind === 'key' && <KeyDialog user={dialog.user} onClose={close} onCreated={keys.reload} />}
      {dialog?.kind === 'delete' && (
        <ConfirmDialog title={`Delete ${dialog.user.email}?`} confirmLabel="Delete user" onClose={close} onConfirm={async () => { await run(DeleteUser, { id: dialog.user.id }); users.reload(); keys.reload(); }}>
          The user can no longer sign in and their API keys are revoked; the audit trail keeps their changes.
        </ConfirmDialog>
      )}
    </>
  );
}

/**
 * A user's roles (checkboxes) and features (checkboxes: the user's own and those the resources ask
 * for, plus any typed in), saved with `updateUser`; the server's VALIDATION_ERROR is shown next to
 * the group it is about.
 */
function AccessDialog({ user, onClose, onSaved }: { user: U; onClose: () => void; onSaved: () => void }) {
  const known = useAsync(() => resourceTypes().then((ts) => ts.flatMap((t) => t.features)), []);
  // The custom roles of the user's tenant, when the server keeps any (the access plugin is on).
  const custom = useAsync(() => (rootFields.value?.has('roles') ? run(RolesPage, { per_page: 500 }).then((r) => r.roles.items.filter((x) => x.tenant_id === user.tenant_id).map((x) => x.name)) : Promise.resolve([])), []);
  const [roles, setRoles] = useState(user.roles);
  const [features, setFeatures] = useState(user.features);
  const [extra, setExtra] = useState<string[]>([]);
  const [typed, setTyped] = useState('');
  const { error, busy, act } = useAction();
  const choices = [...new Set([...user.features, ...(known.data ?? []), ...extra])].sort();
  const toggle = (all: string[], v: string, on: boolean) => (on ? [...all.filter((x) => x !== v), v] : all.filter((x) => x !== v));
  /** Typed features become checked choices; returns the features to save. */
  const addTyped = (): string[] => {
    const add = list(typed);
    setExtra([...new Set([...extra, ...add])]);
    setTyped('');
    const next = [...new Set([...features, ...add])];
    setFeatures(next);
    return next;
  };
  const rolesErr = issuesOf(error, 'roles');
  const featuresErr = issuesOf(error, 'features');
  const other = error && !rolesErr && !featuresErr ? error : null;
  return (
    <Dialog title={`Roles and features of ${user.email}`} onClose={onClose} testId="access-dialog">
      <form noValidate onSubmit={(e) => {
        e.preventDefault();
        if (busy) return;
        const f = typed.trim() ? addTyped() : features;
        void act(() => run(UpdateUser, { id: user.id, input: { roles, features: f } }), onSaved, onClose);
      }}>
        <fieldset class="tags" aria-describedby={rolesErr ? 'acc-roles-err' : undefined}>
          <legend>Roles</legend>
          {[...new Set([...ROLES, ...(custom.data ?? []), ...user.roles])].map((r) => (
            <label key={r} class="inline"><input type="checkbox" checked={roles.includes(r)} onChange={(e) => setRoles(toggle(roles, r, e.currentTarget.checked))} /> {r}</label>
          ))}
        </fieldset>
        {rolesErr && <span id="acc-roles-err" class="field-error">{rolesErr}</span>}
        <fieldset class="tags" aria-describedby={featuresErr ? 'acc-features-err' : undefined}>
          <legend>Features</legend>
          {choices.length === 0 && <span class="muted">No features yet.</span>}
          {choices.map((f) => (
            <label key={f} class="inline"><input type="checkbox" checked={features.includes(f)} onChange={(e) => setFeatures(toggle(features, f, e.currentTarget.checked))} /> {f}</label>
          ))}
        </fieldset>
        {featuresErr && <span id="acc-features-err" class="field-error">{featuresErr}</span>}
        <div class="inline-form">
          <label for="acc-new-feature">Add features (comma-separated)</label>
          <input id="acc-new-feature" value={typed} onInput={(e) => setTyped(e.currentTarget.value)}
            onKeyDown={(e) => { if (e.key === 'Enter') { e.preventDefault(); addTyped(); } }} />
          <button type="button" onClick={() => addTyped()}>Add</button>
        </div>
        <ErrorBox error={other ?? (rolesErr || featuresErr ? new ApiError('Some fields are not valid: see the messages next to them', 'VALIDATION_ERROR', 422, {}, (error as ApiError).requestId) : null)} />
        <p class="actions">
          {/* Not disabled while saving: a disabled button would drop the keyboard focus out of the dialog. */}
          <button type="submit" aria-disabled={busy ? 'true' : undefined}>Save</button>
          <button type="button" onClick={onClose}>Cancel</button>
        </p>
      </form>
    </Dialog>
  );
}

/** A new API key for `user`: named here, then shown in the dialog this once. */
function KeyDialog({ user, onClose, onCreated }: { user: U; onClose: () => void; onCreated: () => void }) {
  const [name, setName] = useState('');
  const [key, setKey] = useState<string | null>(null);
  const { error, busy, act } = useAction();
  const copied = useRef<HTMLButtonElement>(null);
  // The form (and its focused button) is gone: focus the way out, after the status is announced.
  useEffect(() => copied.current?.focus(), [key]);
  return (
    <Dialog title={`New API key for ${user.email}`} onClose={onClose} testId="key-dialog">
      {key ? (
        <>
          <p role="status">New key, shown this once: copy it now.</p>
          <p><code data-testid="new-key">{key}</code></p>
          <p class="actions"><button type="button" ref={copied} onClick={onClose}>I have copied it</button></p>
        </>
      ) : (
        <form onSubmit={(e) => {
          e.preventDefault();
          if (!busy) void act(async () => setKey((await run(CreateApiKey, { user_id: user.id, name })).createApiKey.key ?? null), onCreated);
        }}>
          <div class="row"><label for="k-name">Key name</label><input id="k-name" required value={name} onInput={(e) => setName(e.currentTarget.value)} /></div>
          <ErrorBox error={error} />
          <p class="actions">
            <button type="submit" aria-disabled={busy ? 'true' : undefined}>Create key</button>
            <button type="button" onClick={onClose}>Cancel</button>
          </p>
        </form>
      )}
    </Dialog>
  );
}
