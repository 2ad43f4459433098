/**
 * Roles: a tenant's custom roles a page at a time (`roles`), created and edited in a structured
 * form (per resource and action: denied, everything, or a rule of rows, fields, presets and check)
 * with a JSON fallback, deleted in a dialog; and "Explain": a user's effective rule for a resource
 * and action (`explainAccess`), read as sentences and lists.
 */
import { useState } from 'preact/hooks';
import { actingTenant, ApiError, isSystem, run, session } from '../api.ts';
import { CreateRole, DeleteRole, ExplainAccess, RolesPage, UpdateRole, UsersPage, type Role } from '../graphql.ts';
import { resourceTypes } from '../resources.ts';
import { ConfirmDialog, Empty, ErrorBox, Loading, Notice, Pager, ShortId, Time, toast, useAction, useAsync } from '../ui.tsx';

const PER_PAGE = 20;
const ACTIONS = ['read', 'create', 'update', 'delete'] as const;
type Action = (typeof ACTIONS)[number];
/** One action's rule as the form holds it: JSON parts as text until saved. */
interface ActionForm { mode: 'none' | 'all' | 'rule'; rows: string; fields: string; except: boolean; presets: string; check: string }
type PermsForm = Record<string, Record<Action, ActionForm>>;
type Rule = true | { rows?: unknown; fields?: string[] | { except: string[] }; presets?: unknown; check?: unknown };

const blank = (): ActionForm => ({ mode: 'none', rows: '', fields: '', except: false, presets: '', check: '' });
const list = (s: string) => s.split(',').map((x) => x.trim()).filter(Boolean);
const text = (v: unknown) => (v === undefined ? '' : JSON.stringify(v));

/** A role's `permissions` as the form's state. */
function toForm(perms: unknown): PermsForm {
  const out: PermsForm = {};
  for (const [res, rules] of Object.entries((perms ?? {}) as Record<string, Partial<Record<Action, Rule>>>)) {
    const block = { read: blank(), create: blank(), update: blank(), delete: blank() };
    for (const a of ACTIONS) {
      const r = rules[a];
      if (r === true) block[a].mode = 'all';
      else if (r) {
        const fields = Array.isArray(r.fields) ? r.fields : r.fields?.except;
        block[a] = { mode: 'rule', rows: text(r.rows), fields: (fields ?? []).join(', '), except: !!r.fields && !Array.isArray(r.fields), presets: text(r.presets), check: text(r.check) };
      }
    }
    out[res] = block;
  }
  return out;
}

/** The form's state as `permissions`. @throws Error naming the part whose JSON does not parse */
function fromForm(form: PermsForm): Record<string, Partial<Record<Action, Rule>>> {
  const parse = (where: string, s: string) => {
    if (!s.trim()) return undefined;
    try {
      return JSON.parse(s) as unknown;
    } catch {
      throw new Error(`${where} is not valid JSON (example: {"status": "open"})`);
    }
  };
  const out: Record<string, Partial<Record<Action, Rule>>> = {};
  for (const [res, block] of Object.entries(form)) {
    const rules: Partial<Record<Action, Rule>> = {};
    for (const a of ACTIONS) {
      const f = block[a];
      if (f.mode === 'all') rules[a] = true;
      if (f.mode !== 'rule') continue;
      const r: Exclude<Rule, true> = {};
      const rows = parse(`${res} › ${a} › rows`, f.rows);
      if (rows !== undefined) r.rows = rows;
      if (f.fields.trim() || f.except) r.fields = f.except ? { except: list(f.fields) } : list(f.fields);
      if (a === 'create' || a === 'update') {
        const presets = parse(`${res} › ${a} › presets`, f.presets);
        if (presets !== undefined) r.presets = presets;
        const check = parse(`${res} › ${a} › check`, f.check);
        if (check !== undefined) r.check = check;
      }
      rules[a] = r;
    }
    out[res] = rules;
  }
  return out;
}

/** The server's validation issues, each in words with where it is (`projects › read › rows: …`). */
const issueLines = (error: unknown): { at: string; msg: string }[] =>
  error instanceof ApiError && error.code === 'VALIDATION_ERROR'
    ? error.issues.map((i) => ({ at: i.loc.filter((l) => l !== 'body' && l !== 'input').join(' › '), msg: i.msg }))
    : [];

export default function RolesScreen() {
  const system = isSystem(session.value?.user);
  const tenant = actingTenant.value;
  const [page, setPage] = useState(1);
  const roles = useAsync(() => run(RolesPage, { page, per_page: PER_PAGE }).then((r) => r.roles), [page]);
  const all = useAsync(() => run(RolesPage, { per_page: 500 }).then((r) => r.roles.items), []);
  const [editing, setEditing] = useState<Role | 'new' | null>(null);
  const [deleting, setDeleting] = useState<Role | null>(null);
  const reload = () => { roles.reload(); all.reload(); };
  // A system administrator's own view spans every tenant; a role belongs to one.
  const canWrite = !system || !!tenant;
  return (
    <>
      <h1>Roles</h1>
      <section aria-labelledby="h-roles">
        <h2 id="h-roles">Custom roles{tenant ? ` of ${tenant.name}` : ''}</h2>
        <p class="muted">Built in: <strong>admin</strong> (everything in the tenant) and <strong>user</strong>. A custom role grants, per resource, what each action may reach; an action without a rule is denied.</p>
        {!canWrite && <Notice>Roles belong to a tenant: choose one with the Tenant switcher above to create or change its roles.</Notice>}
        <Loading when={roles.loading} />
        <ErrorBox error={roles.error} />
        {roles.data && !roles.data.items.length && <Empty>No custom roles yet. Create one with "New role": name it, then choose what it may read and write.</Empty>}
        {!!roles.data?.items.length && (
          <div class="scroll">
            <table data-testid="roles">
              <caption class="sr-only">Custom roles</caption>
              <thead><tr><th scope="col">Name</th><th scope="col">Description</th><th scope="col">Includes</th><th scope="col">Resources</th><th scope="col">Changed</th>{canWrite ? <th scope="col">Actions</th> : <th scope="col">Tenant</th>}</tr></thead>
              <tbody>
                {roles.data.items.map((r) => (
                  <tr key={r.id}>
                    <td><strong>{r.name}</strong></td>
                    <td>{r.description ?? ''}</td>
                    <td>{r.includes.join(', ') || 'none'}</td>
                    <td>{Object.keys((r.permissions ?? {}) as object).join(', ') || 'none'}</td>
                    <td><Time v={r.updated_at} /></td>
                    <td>
                      {canWrite ? (
                        <div class="actions">
                          <button type="button" onClick={() => setEditing(r)}>Edit<span class="sr-only"> {r.name}</span></button>
                          <button type="button" onClick={() => setDeleting(r)}>Delete<span class="sr-only"> {r.name}</span>…</button>
                        </div>
                      ) : <ShortId id={r.tenant_id} label="tenant id" />}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
        {roles.data && <Pager label="Pages of roles" page={roles.data.page} totalPages={roles.data.total_pages} onPage={setPage} />}
        {canWrite && !editing && <p><button type="button" onClick={() => setEditing('new')}>New role</button></p>}
      </section>
      {editing && (
        <RoleForm key={editing === 'new' ? 'new' : editing.id} role={editing === 'new' ? null : editing} others={(all.data ?? []).filter((r) => editing === 'new' || r.id !== editing.id).map((r) => r.name)}
          onClose={() => setEditing(null)} onSaved={reload} />
      )}
      <Explain />
      {deleting && (
        <ConfirmDialog title={`Delete the role ${deleting.name}?`} confirmLabel="Delete role" onClose={() => setDeleting(null)}
          onConfirm={async () => {
            try {
              await run(DeleteRole, { id: deleting.id });
            } catch (e) {
              // 409: still held or included; say what to do in words, keeping the code and request id.
              if (e instanceof ApiError && e.status === 409) throw new ApiError(`${e.message}. Take it away from those users (Identity, "Roles and features…") or from the roles that include it, then delete it.`, e.code, e.status, e.details, e.requestId);
              throw e;
            }
            toast(`Role ${deleting.name} deleted`);
            reload();
          }}>
          Users can no longer be given this role. A role still held by a user, or included by another role, cannot be deleted.
        </ConfirmDialog>
      )}
    </>
  );
}

/** Create (`role` null) or edit a role: name, description, included roles and the rules per resource, or all of them as JSON. */
function RoleForm({ role, others, onClose, onSaved }: { role: Role | null; others: string[]; onClose: () => void; onSaved: () => void }) {
  const resources = useAsync(() => resourceTypes().then((ts) => ts.map((t) => t.name)), []);
  const [name, setName] = useState(role?.name ?? '');
  const [description, setDescription] = useState(role?.description ?? '');
  const [includes, setIncludes] = useState<string[]>(role?.includes ?? []);
  const [perms, setPerms] = useState<PermsForm>(() => toForm(role?.permissions));
  const [asJson, setAsJson] = useState<string | null>(null);
  const [adding, setAdding] = useState('');
  const { error, busy, act, setError } = useAction();
  const issues = issueLines(error);
  const at = (prefix: string) => issues.filter((i) => i.at === prefix || i.at.startsWith(`${prefix} › `)).map((i) => i.msg).join('; ');
  const setRule = (res: string, a: Action, patch: Partial<ActionForm>) => setPerms({ ...perms, [res]: { ...perms[res]!, [a]: { ...perms[res]![a], ...patch } } });
  const toggleJson = () => {
    try {
      if (asJson === null) setAsJson(JSON.stringify(fromForm(perms), null, 2));
      else {
        setPerms(toForm(JSON.parse(asJson)));
        setAsJson(null);
      }
      setError(null);
    } catch (e) {
      setError(e instanceof SyntaxError ? new Error('The permissions are not valid JSON') : e);
    }
  };
  const save = () => {
    let permissions: unknown;
    try {
      permissions = asJson === null ? fromForm(perms) : JSON.parse(asJson);
    } catch (e) {
      return setError(e instanceof SyntaxError ? new Error('The permissions are not valid JSON') : e);
    }
    const input = { name, description: description.trim() || null, includes, permissions };
    void act(() => (role ? run(UpdateRole, { id: role.id, input }) : run(CreateRole, { input })), onSaved, () => toast(`Role ${name} saved`), onClose);
  };
  const free = (resources.data ?? []).filter((r) => !(r in perms));
  const id = (res: string, a: Action, part: string) => `rule-${res}-${a}-${part}`;
  return (
    <section aria-labelledby="h-role-form" data-testid="role-form">
      <h2 id="h-role-form">{role ? `Edit role ${role.name}` : 'New role'}</h2>
      <form noValidate onSubmit={(e) => { e.preventDefault(); if (!busy) save(); }}>
        <div class="row"><label for="role-name">Name (lower case, digits, - and _)</label>
          <input id="role-name" required value={name} onInput={(e) => setName(e.currentTarget.value)} aria-describedby={at('name') ? 'role-name-err' : undefined} />
          {at('name') && <span id="role-name-err" class="field-error">{at('name')}</span>}</div>
        <div class="row"><label for="role-desc">Description</label><input id="role-desc" value={description} onInput={(e) => setDescription(e.currentTarget.value)} /></div>
        <fieldset class="tags">
          <legend>Includes (holds every permission of)</legend>
          {!others.length && <span class="muted">No other roles yet.</span>}
          {others.map((o) => (
            <label key={o} class="inline"><input type="checkbox" checked={includes.includes(o)} onChange={(e) => setIncludes(e.currentTarget.checked ? [...includes, o] : includes.filter((x) => x !== o))} /> {o}</label>
          ))}
        </fieldset>
        {at('includes') && <span class="field-error">{at('includes')}</span>}
        <h3>Permissions</h3>
        <p><button type="button" onClick={toggleJson}>{asJson === null ? 'Edit as JSON' : 'Back to the form'}</button></p>
        {asJson !== null ? (
          <div class="row"><label for="role-json">Permissions (JSON: resource → action → true or a rule)</label>
            <textarea id="role-json" rows={12} value={asJson} onInput={(e) => setAsJson(e.currentTarget.value)} /></div>
        ) : (
          <>
            {!Object.keys(perms).length && <p class="muted">No resource yet: this role grants nothing until you add one.</p>}
            {Object.entries(perms).map(([res, block]) => (
              <fieldset key={res} class="rule-block" data-testid={`rules-${res}`}>
                <legend>{res}</legend>
                {at(`permissions › ${res}`) && !ACTIONS.some((a) => at(`permissions › ${res} › ${a}`)) && <span class="field-error">{at(`permissions › ${res}`)}</span>}
                {ACTIONS.map((a) => {
                  const f = block[a];
                  const err = at(`permissions › ${res} › ${a}`);
                  return (
                    <div key={a} class="rule">
                      <div class="row"><label for={id(res, a, 'mode')}>{a}</label>
                        <select id={id(res, a, 'mode')} value={f.mode} onChange={(e) => setRule(res, a, { mode: e.currentTarget.value as ActionForm['mode'] })}>
                          <option value="none">denied</option>
                          <option value="all">every row and field</option>
                          <option value="rule">a rule…</option>
                        </select></div>
                      {f.mode === 'rule' && (
                        <>
                          <div class="row"><label for={id(res, a, 'rows')}>Rows (filter JSON, e.g. {'{"owner_id": "$actor.id"}'}; empty: every row)</label>
                            <input id={id(res, a, 'rows')} value={f.rows} onInput={(e) => setRule(res, a, { rows: e.currentTarget.value })} /></div>
                          <div class="row"><label for={id(res, a, 'fields')}>Fields (comma-separated; empty: every field)</label>
                            <input id={id(res, a, 'fields')} value={f.fields} onInput={(e) => setRule(res, a, { fields: e.currentTarget.value })} />
                            <label class="inline"><input type="checkbox" checked={f.except} onChange={(e) => setRule(res, a, { except: e.currentTarget.checked })} /> all fields except these</label></div>
                          {(a === 'create' || a === 'update') && (
                            <>
                              <div class="row"><label for={id(res, a, 'presets')}>Presets (JSON the server sets)</label>
                                <input id={id(res, a, 'presets')} value={f.presets} onInput={(e) => setRule(res, a, { presets: e.currentTarget.value })} /></div>
                              <div class="row"><label for={id(res, a, 'check')}>Check (filter JSON the result must match)</label>
                                <input id={id(res, a, 'check')} value={f.check} onInput={(e) => setRule(res, a, { check: e.currentTarget.value })} /></div>
                            </>
                          )}
                        </>
                      )}
                      {err && <span class="field-error" data-testid="rule-error">{err}</span>}
                    </div>
                  );
                })}
                <button type="button" onClick={() => { const { [res]: _gone, ...rest } = perms; setPerms(rest); }}>Remove {res}</button>
              </fieldset>
            ))}
            <div class="inline-form">
              <label for="role-add-resource">Add a resource</label>
              <select id="role-add-resource" value={adding} onChange={(e) => setAdding(e.currentTarget.value)}>
                <option value="">choose…</option>
                {free.map((r) => <option key={r} value={r}>{r}</option>)}
              </select>
              <button type="button" onClick={() => { if (adding) { setPerms({ ...perms, [adding]: { read: blank(), create: blank(), update: blank(), delete: blank() } }); setAdding(''); } }}>Add</button>
            </div>
          </>
        )}
        {issues.length > 0 && (
          <div class="error" role="alert" data-testid="role-issues">
            <strong>The role was not saved:</strong>
            <ul>{issues.map((i, n) => <li key={n}>{i.at ? `${i.at}: ` : ''}{i.msg}</li>)}</ul>
          </div>
        )}
        {!issues.length && <ErrorBox error={error} />}
        <p class="actions">
          <button type="submit" aria-disabled={busy ? 'true' : undefined}>{role ? 'Save role' : 'Create role'}</button>
          <button type="button" onClick={onClose}>Cancel</button>
        </p>
      </form>
    </section>
  );
}

interface Explanation { allowed: boolean; roles: string[]; restricted: boolean; rows: unknown; fields: string[] | null; presets: Record<string, unknown>; check: unknown; grants: { role: string; rows: unknown; fields: string[] | null }[] }

/** A user's effective rule for a resource and action, after combining their roles. */
function Explain() {
  const users = useAsync(() => run(UsersPage, { per_page: 100 }).then((r) => r.usersPage.items), []);
  const resources = useAsync(() => resourceTypes().then((ts) => ts.map((t) => t.name)), []);
  const [choice, setQ] = useState({ user_id: '', resource: '', action: 'read' });
  // Until one is chosen, the first user and resource are (the selects show them).
  const q = { ...choice, user_id: choice.user_id || (users.data?.[0]?.id ?? ''), resource: choice.resource || (resources.data?.[0] ?? '') };
  const [result, setResult] = useState<Explanation | null>(null);
  const { error, busy, act } = useAction();
  const json = (v: unknown) => <code>{JSON.stringify(v)}</code>;
  return (
    <section aria-labelledby="h-explain">
      <h2 id="h-explain">Explain a user's access</h2>
      <form class="filters" onSubmit={(e) => {
        e.preventDefault();
        if (!busy) void act(async () => setResult((await run(ExplainAccess, q)).explainAccess as Explanation));
      }}>
        <div class="row"><label for="ex-user">User</label>
          <select id="ex-user" value={q.user_id} onChange={(e) => setQ({ ...q, user_id: e.currentTarget.value })}>
            {(users.data ?? []).map((u) => <option key={u.id} value={u.id}>{u.email} ({u.roles.join(', ')})</option>)}
          </select></div>
        <div class="row"><label for="ex-resource">Resource</label>
          <select id="ex-resource" value={q.resource} onChange={(e) => setQ({ ...q, resource: e.currentTarget.value })}>
            {(resources.data ?? []).map((r) => <option key={r} value={r}>{r}</option>)}
          </select></div>
        <div class="row"><label for="ex-action">Action</label>
          <select id="ex-action" value={q.action} onChange={(e) => setQ({ ...q, action: e.currentTarget.value })}>
            {ACTIONS.map((a) => <option key={a} value={a}>{a}</option>)}
          </select></div>
        <button type="submit" aria-disabled={busy ? 'true' : undefined}>Explain</button>
      </form>
      <ErrorBox error={error} />
      {result && (
        <div data-testid="explain" aria-live="polite">
          <p><strong class={result.allowed ? 'verdict-ok' : 'verdict-bad'}>{result.allowed ? 'Allowed' : 'Denied'}</strong>
            {result.restricted ? '' : ': no rule applies here, so access is as the built-in roles give it.'}</p>
          <dl class="explain">
            <dt>Roles (with included ones)</dt><dd>{result.roles.join(', ') || 'none'}</dd>
            <dt>Rows</dt><dd>{result.rows === null ? 'every row' : json(result.rows)}</dd>
            <dt>Fields</dt><dd>{result.fields === null ? 'every field' : result.fields.join(', ') || 'none'}</dd>
            <dt>Presets (set by the server)</dt><dd>{Object.keys(result.presets).length ? json(result.presets) : 'none'}</dd>
            <dt>Check (a written document must match)</dt><dd>{result.check === null ? 'nothing' : json(result.check)}</dd>
          </dl>
          {result.grants.length > 0 && (
            <ul data-testid="grants">{result.grants.map((g) => <li key={g.role}><strong>{g.role}</strong>: {g.rows === null ? 'every row' : <>rows {json(g.rows)}</>}; {g.fields === null ? 'every field' : `fields ${g.fields.join(', ')}`}</li>)}</ul>
          )}
        </div>
      )}
    </section>
  );
}
