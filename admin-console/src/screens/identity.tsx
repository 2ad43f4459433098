/** Identity: tenants (system administrators create them), users (create, disable, delete, roles, features), API keys (key shown once, revoke). */
import { useState } from 'preact/hooks';
import { isSystem, run, session } from '../api.ts';
import { ApiKeys, CreateApiKey, CreateTenant, CreateUser, DeleteUser, RevokeApiKey, Tenants, UpdateUser, Users } from '../graphql.ts';
import { ErrorBox, Loading, Notice, useAsync } from '../ui.tsx';

const list = (s: string) => s.split(',').map((x) => x.trim()).filter(Boolean);

export function IdentityScreen() {
  const system = isSystem(session.value?.user);
  const tenants = useAsync(() => run(Tenants).then((r) => r.tenants), []);
  const users = useAsync(() => run(Users, {}).then((r) => r.users), []);
  const keys = useAsync(() => run(ApiKeys, {}).then((r) => r.apiKeys), []);
  const [error, setError] = useState<unknown>(null);
  const [shownKey, setShownKey] = useState<string | null>(null);
  const [tenantName, setTenantName] = useState('');
  const [nu, setNu] = useState({ email: '', name: '', tenant_id: '', roles: 'user', features: '' });
  const [keyFor, setKeyFor] = useState({ user_id: '', name: '' });
  const act = async (fn: () => Promise<unknown>, reload: (() => void)[]) => {
    setError(null);
    try {
      await fn();
      reload.forEach((r) => r());
    } catch (e) {
      setError(e);
    }
  };
  return (
    <>
      <h1>Identity</h1>
      <ErrorBox error={error} />
      <section aria-labelledby="h-tenants">
        <h2 id="h-tenants">Tenants</h2>
        <Loading when={tenants.loading} />
        <ErrorBox error={tenants.error} />
        <ul data-testid="tenants">
          {(tenants.data ?? []).map((t) => <li key={t.id}>{t.name} <code>{t.id}</code>{t.is_system ? ' (system)' : ''}</li>)}
        </ul>
        {system && (
          <form class="inline-form" onSubmit={(e) => { e.preventDefault(); void act(() => run(CreateTenant, { name: tenantName }).then(() => setTenantName('')), [tenants.reload]); }}>
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
        <div class="scroll">
          <table data-testid="users">
            <caption class="sr-only">Users</caption>
            <thead><tr><th scope="col">Email</th><th scope="col">Roles</th><th scope="col">Features</th><th scope="col">Active</th><th scope="col">Actions</th></tr></thead>
            <tbody>
              {(users.data ?? []).map((u) => (
                <tr key={u.id}>
                  <td>{u.email}<br /><small class="muted">{u.name} · tenant {u.tenant_id}</small></td>
                  <td>{u.roles.join(', ')}</td>
                  <td>{u.features.join(', ')}</td>
                  <td>{u.is_active ? 'yes' : 'disabled'}</td>
                  <td class="actions">
                    <button type="button" onClick={() => act(() => run(UpdateUser, { id: u.id, input: { is_active: !u.is_active } }), [users.reload])}>{u.is_active ? 'Disable' : 'Enable'}</button>
                    <button type="button" onClick={() => act(() => run(UpdateUser, { id: u.id, input: { roles: u.roles.includes('admin') ? ['user'] : ['user', 'admin'] } }), [users.reload])}>
                      {u.roles.includes('admin') ? 'Remove admin role' : 'Make admin'}
                    </button>
                    <button type="button" onClick={() => { const f = prompt(`Features of ${u.email} (comma-separated)`, u.features.join(', ')); if (f !== null) void act(() => run(UpdateUser, { id: u.id, input: { features: list(f) } }), [users.reload]); }}>Features…</button>
                    <button type="button" onClick={() => confirm(`Delete ${u.email}?`) && act(() => run(DeleteUser, { id: u.id }), [users.reload, keys.reload])}>Delete</button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        <form class="filters" aria-label="New user" onSubmit={(e) => {
          e.preventDefault();
          void act(() => run(CreateUser, { input: { email: nu.email, name: nu.name, roles: list(nu.roles), features: list(nu.features), ...(nu.tenant_id ? { tenant_id: nu.tenant_id } : {}) } }).then(() => setNu({ ...nu, email: '', name: '' })), [users.reload]);
        }}>
          <h3>New user</h3>
          <div class="row"><label for="u-email">Email</label><input id="u-email" type="email" required value={nu.email} onInput={(e) => setNu({ ...nu, email: e.currentTarget.value })} /></div>
          <div class="row"><label for="u-name">Name</label><input id="u-name" required value={nu.name} onInput={(e) => setNu({ ...nu, name: e.currentTarget.value })} /></div>
          {system && (
            <div class="row">
              <label for="u-tenant">Tenant</label>
              <select id="u-tenant" value={nu.tenant_id} onChange={(e) => setNu({ ...nu, tenant_id: e.currentTarget.value })}>
                <option value="">(my tenant)</option>
                {(tenants.data ?? []).map((t) => <option key={t.id} value={t.id}>{t.name}</option>)}
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
        {shownKey && (
          <Notice>
            New key, shown this once: copy it now. <code data-testid="new-key">{shownKey}</code>{' '}
            <button type="button" onClick={() => setShownKey(null)}>I have copied it</button>
          </Notice>
        )}
        <Loading when={keys.loading} />
        <ErrorBox error={keys.error} />
        <ul data-testid="keys">
          {(keys.data ?? []).map((k) => (
            <li key={k.id}>
              {k.name} <code>{k.prefix}…</code> (user {k.user_id}){' '}
              <button type="button" onClick={() => act(() => run(RevokeApiKey, { id: k.id }), [keys.reload])}>Revoke {k.name}</button>
            </li>
          ))}
        </ul>
        <form class="inline-form" onSubmit={(e) => {
          e.preventDefault();
          void act(async () => {
            const r = await run(CreateApiKey, keyFor);
            setShownKey(r.createApiKey.key ?? null);
          }, [keys.reload]);
        }}>
          <label for="k-user">User</label>
          <select id="k-user" required value={keyFor.user_id} onChange={(e) => setKeyFor({ ...keyFor, user_id: e.currentTarget.value })}>
            <option value="">choose…</option>
            {(users.data ?? []).map((u) => <option key={u.id} value={u.id}>{u.email}</option>)}
          </select>
          <label for="k-name">Key name</label>
          <input id="k-name" required value={keyFor.name} onInput={(e) => setKeyFor({ ...keyFor, name: e.currentTarget.value })} />
          <button type="submit">Create key</button>
        </form>
      </section>
    </>
  );
}
