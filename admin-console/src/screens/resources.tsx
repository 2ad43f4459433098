/** Generic resource screens, from `resourceTypes`: list (filters, search, tags, sort, cursor pages, bulk delete), detail, create/edit forms. */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, isAdmin, session, type User } from '../api.ts';
import type { Field, ResourceType } from '../graphql.ts';
import { createDoc, deleteDoc, deleteMany, getDoc, listDocs, publishDoc, resourceTypes, restoreDoc, updateDoc, type Doc, type ListArgs } from '../resources.ts';
import { Crumbs, Empty, ErrorBox, fieldLabel, go, toast, Time, Loading, Notice, show, StatusBadge, useAsync, Value, waitFor } from '../ui.tsx';
import type { HistoryPanel as Panel } from './history.tsx';

/** A resource's singular in words, from its GraphQL type: `ProjectTask` → "project task". */
const singular = (t: { graphql_type: string }) => t.graphql_type.replace(/([a-z0-9])([A-Z])/g, '$1 $2').toLowerCase();

export function ResourcesScreen({ route }: { route: string[] }) {
  const types = useAsync(resourceTypes, []);
  const [name, id, mode] = route;
  const list = (types.data ?? []).filter((t) => t.accessible && t.operations.list);
  const t = list.find((x) => x.name === (name ?? list[0]?.name));
  return (
    <>
      <h1>Resources</h1>
      <Loading when={types.loading} />
      <ErrorBox error={types.error} />
      <nav aria-label="Resources" class="tabs">
        {list.map((x) => (
          <a key={x.name} href={`#/resources/${x.name}`} aria-current={x.name === t?.name ? 'page' : undefined}>{x.name}</a>
        ))}
      </nav>
      {types.data && !t && (
        <Empty>
          {name ? `There is no resource "${name}" you may use.` : 'There is no resource you may use yet.'} A resource can need a feature of its own: an
          administrator gives it to you in Identity, under "Roles and features".{list.length ? ' Choose one of the resources above.' : ''}
        </Empty>
      )}
      {t && !id && <ResourceList key={t.name} t={t} />}
      {t && id === 'new' && <ResourceForm key="new" t={t} />}
      {t && id && id !== 'new' && mode === 'edit' && <ResourceForm key={`e${id}`} t={t} id={id} />}
      {t && id && id !== 'new' && !mode && <ResourceDetail key={id} t={t} id={id} />}
    </>
  );
}

const OPS = ['eq', 'gt', 'gte', 'lt', 'lte', 'ne', 'in', 'nin', 'exists', 'regex'];
/** The filter operators in words. */
const OP_LABELS: Record<string, string> = {
  eq: 'is', ne: 'is not', gt: 'is more than', gte: 'is at least', lt: 'is less than', lte: 'is at most',
  in: 'is one of', nin: 'is none of', exists: 'is set (yes/no)', regex: 'matches the pattern',
};

/** Explains a refused delete instead of dumping it. */
function explain(e: unknown): unknown {
  if (e instanceof ApiError && e.code === 'CASCADE_DENY') {
    const d = e.details as { resource?: string; item_id?: string; referenced_by?: string; count?: number };
    return new ApiError(
      `This ${d.resource ?? 'document'} cannot be deleted: ${d.count ?? 'some'} ${d.referenced_by ?? 'other'} document(s) still refer to it. Delete or move those first, then try again.`,
      e.code, e.status, e.details, e.requestId,
    );
  }
  return e;
}

function ResourceList({ t }: { t: ResourceType }) {
  const admin = isAdmin(session.value?.user);
  const [filters, setFilters] = useState<{ field: string; op: string; value: string }[]>([]);
  const [q, setQ] = useState('');
  const [tags, setTags] = useState('');
  const [sort, setSort] = useState(t.default_sort);
  const [deleted, setDeleted] = useState(false);
  const [page, setPage] = useState<{ cursor?: string; direction?: 'next' | 'prev' }>({});
  const [applied, setApplied] = useState<Omit<ListArgs, 'limit' | 'cursor' | 'direction'>>({ sort: t.default_sort });
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [actionError, setActionError] = useState<unknown>(null);
  const limit = Math.min(20, t.max_page_size);
  const res = useAsync(() => listDocs(t, { ...applied, ...page, limit }), [JSON.stringify(applied), page.cursor, page.direction]);
  const hasTags = t.fields.some((f) => f.name === 'tags');
  const columns = t.fields.slice(0, 5);

  const apply = (e: Event) => {
    e.preventDefault();
    const filter: Record<string, unknown> = {};
    for (const f of filters) if (f.field && f.value !== '') filter[f.op === 'eq' ? f.field : `${f.field}__${f.op}`] = f.value;
    setApplied({
      ...(Object.keys(filter).length ? { filter } : {}),
      ...(q ? { q } : {}),
      ...(tags ? { tags_all: tags.split(',').map((s) => s.trim()).filter(Boolean) } : {}),
      sort,
      ...(deleted ? { include_deleted: true } : {}),
    });
    setPage({});
    setSelected(new Set());
  };
  const bulkDelete = async () => {
    setActionError(null);
    try {
      await deleteMany(t, (res.data?.items ?? []).filter((d) => selected.has(d._id)));
      setSelected(new Set());
      res.reload();
    } catch (e) {
      setActionError(explain(e));
    }
  };
  const toggle = (id: string) => {
    const next = new Set(selected);
    if (next.has(id)) next.delete(id);
    else next.add(id);
    setSelected(next);
  };
  // Offered only to a caller who may use them (the resource's `actions`): nothing the server refuses for want of a right.
  const mayCreate = t.actions.includes('create');
  const bulk = t.allow_bulk_delete && t.actions.includes('delete');
  return (
    <section aria-labelledby="h-list">
      <h2 id="h-list">{t.name}</h2>
      {mayCreate && <p><a class="button" href={`#/resources/${t.name}/new`}>New {singular(t)}</a></p>}
      <form class="filters" onSubmit={apply} aria-label={`Filter ${t.name}`}>
        {t.searchable_fields.length > 0 && (
          <div class="row">
            <label for="f-q">Search ({t.searchable_fields.join(', ')})</label>
            <input id="f-q" type="search" value={q} onInput={(e) => setQ(e.currentTarget.value)} />
          </div>
        )}
        {hasTags && (
          <div class="row">
            <label for="f-tags">Tags (all of, comma-separated)</label>
            <input id="f-tags" value={tags} onInput={(e) => setTags(e.currentTarget.value)} />
          </div>
        )}
        <div class="row">
          <label for="f-sort">Sort</label>
          <select id="f-sort" value={sort} onChange={(e) => setSort(e.currentTarget.value)}>
            {[t.default_sort, ...['created_at', ...t.fields.map((f) => f.name)].flatMap((n) => [n, `-${n}`])].filter((v, i, a) => a.indexOf(v) === i).map((v) => (
              <option key={v} value={v}>{v.startsWith('-') ? `${fieldLabel(v.slice(1))}, descending` : `${fieldLabel(v)}, ascending`}</option>
            ))}
          </select>
        </div>
        {filters.map((f, i) => (
          <fieldset key={i} class="row">
            <legend class="sr-only">Filter {i + 1}</legend>
            <label for={`ff${i}`}>Field</label>
            <select id={`ff${i}`} value={f.field} onChange={(e) => setFilters(filters.map((x, j) => (j === i ? { ...x, field: e.currentTarget.value } : x)))}>
              {t.fields.map((x) => <option key={x.name} value={x.name}>{fieldLabel(x.name)}</option>)}
            </select>
            <label for={`fo${i}`}>Operator</label>
            <select id={`fo${i}`} value={f.op} onChange={(e) => setFilters(filters.map((x, j) => (j === i ? { ...x, op: e.currentTarget.value } : x)))}>
              {OPS.filter((o) => o === 'eq' || t.filter_operators.includes(o)).map((o) => <option key={o} value={o}>{OP_LABELS[o] ?? o}</option>)}
            </select>
            <label for={`fv${i}`}>Value</label>
            <input id={`fv${i}`} value={f.value} onInput={(e) => setFilters(filters.map((x, j) => (j === i ? { ...x, value: e.currentTarget.value } : x)))} />
            <button type="button" onClick={() => setFilters(filters.filter((_, j) => j !== i))}>Remove filter</button>
          </fieldset>
        ))}
        <div class="row">
          <button type="button" onClick={() => setFilters([...filters, { field: t.fields[0]?.name ?? '', op: 'eq', value: '' }])}>Add filter</button>
          {admin && (
            <label class="inline"><input type="checkbox" checked={deleted} onChange={(e) => setDeleted(e.currentTarget.checked)} /> Include deleted</label>
          )}
          <button type="submit">Apply</button>
        </div>
      </form>
      <Loading when={res.loading} />
      <ErrorBox error={res.error} />
      <ErrorBox error={actionError} />
      {res.data && (
        <>
          {bulk && (
            <p>
              <button type="button" disabled={!selected.size} onClick={bulkDelete}>Delete selected ({selected.size})</button>
            </p>
          )}
          {res.data.items.length > 0 && <div class="scroll">
            <table data-testid="resource-list">
              <caption class="sr-only">{t.name}</caption>
              <thead>
                <tr>
                  {bulk && <th scope="col"><span class="sr-only">Select</span></th>}
                  {columns.map((c) => <th key={c.name} scope="col">{fieldLabel(c.name)}</th>)}
                  <th scope="col">Last changed</th>
                </tr>
              </thead>
              <tbody>
                {res.data.items.map((d) => (
                  <tr key={d._id} class={d.is_deleted ? 'deleted' : ''}>
                    {bulk && <td><input type="checkbox" aria-label={`Select ${d._id}`} checked={selected.has(d._id)} onChange={() => toggle(d._id)} /></td>}
                    {columns.map((c, i) => (
                      <td key={c.name}>{i === 0 ? <a href={`#/resources/${t.name}/${d._id}`}>{show(d[c.name]) || d._id}</a> : show(d[c.name])}</td>
                    ))}
                    <td>{d.is_deleted ? 'deleted' : <Time v={d.updated_at} />}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>}
          {!res.data.items.length && <Empty>No {t.name} match. Clear the search and filters{mayCreate ? <>, or create one with &ldquo;New {singular(t)}&rdquo;</> : ''}.</Empty>}
          <nav class="pager" aria-label="Pages">
            {/* aria-disabled, as Pager's: the button that reached the first or last page keeps the focus. */}
            <button type="button" aria-disabled={res.data.cursors?.has_prev ? undefined : 'true'} onClick={() => res.data?.cursors?.has_prev && setPage({ cursor: res.data.cursors.prev!, direction: 'prev' })}>Previous page</button>
            <button type="button" aria-disabled={res.data.cursors?.has_next ? undefined : 'true'} onClick={() => res.data?.cursors?.has_next && setPage({ cursor: res.data.cursors.next!, direction: 'next' })}>Next page</button>
          </nav>
        </>
      )}
    </section>
  );
}

/** A document's name for headings: its first field when that is text. */
const title = (t: ResourceType, d: Doc | null | undefined): string | null => {
  const v = d && t.fields[0] ? d[t.fields[0].name] : null;
  return typeof v === 'string' && v ? v : null;
};

/**
 * What the signed-in user may do to document `d`: edit, delete, publish, unpublish and restore a
 * version as the server answers in `_actions`; restore from deletion, administrators (the only
 * ones who see deleted documents). A button the server would refuse is not offered.
 */
export function documentActions(u: User | undefined, d: Doc): { update: boolean; remove: boolean; publish: boolean; unpublish: boolean; restore: boolean; restoreVersion: boolean } {
  const may = (a: string) => !d.is_deleted && !!d._actions?.includes(a);
  return { update: may('update'), remove: may('delete'), publish: may('publish'), unpublish: may('unpublish'), restore: isAdmin(u) && !!d.is_deleted, restoreVersion: may('restore_version') };
}

type PanelProps = Parameters<typeof Panel>[0];
let historyChunk: Promise<typeof Panel> | null = null;
/** The History panel, its own chunk: fetched when a document that keeps versions is first opened. */
function LazyHistory(props: PanelProps) {
  const [C, setC] = useState<typeof Panel | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    historyChunk ??= import('./history.tsx').then((m) => m.HistoryPanel, (e: unknown) => { historyChunk = null; throw e; });
    waitFor(historyChunk).then((c) => setC(() => c), setError);
  }, []);
  if (C) return <C {...props} />;
  return (
    <section aria-labelledby="h-history" class="history" data-testid="history-loading">
      <h3 id="h-history">History</h3>
      <ErrorBox error={error} />
      {!error && <p class="muted" role="status">Loading the history…</p>}
    </section>
  );
}

function ResourceDetail({ t, id }: { t: ResourceType; id: string }) {
  const doc = useAsync(() => getDoc(t, id, isAdmin(session.value?.user)), [id]);
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState<string | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  const act = async (fn: () => Promise<void>, label: string, msg: string) => {
    setError(null);
    setDone(null);
    setBusy(label);
    try {
      await fn();
      setDone(msg);
      toast(msg);
      doc.reload();
    } catch (e) {
      setError(explain(e));
      toast(`${label}: not done.`, 'bad');
    } finally {
      setBusy(null);
    }
  };
  const d = doc.data;
  const may = d ? documentActions(session.value?.user, d) : null;
  const missing = doc.data === null || (doc.error instanceof ApiError && doc.error.code === 'NOT_FOUND');
  return (
    <section aria-labelledby="h-doc">
      <Crumbs items={[['Resources', '/resources'], [t.name, `/resources/${t.name}`], [`…${id.slice(-6)}`, null]]} />
      <h2 id="h-doc">{t.name}: {title(t, d) ?? id} <StatusBadge status={d?._status} /></h2>
      <Loading when={doc.loading} />
      <ErrorBox error={missing ? null : doc.error} />
      <ErrorBox error={error} />
      {done && <Notice>{done}</Notice>}
      {missing && <Empty>This {singular(t)} does not exist, or you may not see it. <a href={`#/resources/${t.name}`}>Back to the list</a></Empty>}
      {d && may && (
        <>
          <dl class="detail">
            {[...t.fields.map((f) => f.name), '_id', 'created_at', 'updated_at', ...(d.is_deleted ? ['deleted_at'] : [])].map((k) => (
              <div key={k}><dt>{fieldLabel(k)}</dt><dd>{(k.endsWith('_at') || t.fields.some((f) => f.name === k && f.kind === 'date')) && d[k] ? <Time v={d[k]} /> : <Value v={d[k]} />}</dd></div>
            ))}
          </dl>
          {/* The document's actions; a resource's own (publish, unpublish) go here too. */}
          <div class="actions" data-testid="doc-actions">
            {t.operations.update && may.update && <a class="button" href={`#/resources/${t.name}/${id}/edit`}>Edit</a>}
            {t.operations.delete && may.remove && <button type="button" aria-disabled={busy ? 'true' : undefined} onClick={() => !busy && act(() => deleteDoc(t, id, d.etag), 'Delete', `Deleted. Administrators can still restore this ${singular(t)}.`)}>{busy === 'Delete' ? 'Deleting…' : 'Delete'}</button>}
            {t.operations.publish && may.publish && <button type="button" aria-disabled={busy ? 'true' : undefined} onClick={() => !busy && act(() => publishDoc(t, id, d.etag, 'publish'), 'Publish', 'Published: readers now see this version.')}>{busy === 'Publish' ? 'Publishing…' : 'Publish'}</button>}
            {t.operations.unpublish && may.unpublish && <button type="button" aria-disabled={busy ? 'true' : undefined} onClick={() => !busy && act(() => publishDoc(t, id, d.etag, 'unpublish'), 'Unpublish', `Unpublished: only people who may read drafts see this ${singular(t)} now.`)}>{busy === 'Unpublish' ? 'Unpublishing…' : 'Unpublish'}</button>}
            {t.operations.restore && may.restore && <button type="button" aria-disabled={busy ? 'true' : undefined} onClick={() => !busy && act(() => restoreDoc(t, id, d.etag), 'Restore', 'Restored.')}>{busy === 'Restore' ? 'Restoring…' : 'Restore'}</button>}
            <a href={`#/resources/${t.name}`}>Back to the list</a>
          </div>
          {t.versions && <LazyHistory t={t} id={id} etag={d.etag} deleted={!!d.is_deleted} mayRestore={may.restoreVersion} onChanged={doc.reload} />}
        </>
      )}
    </section>
  );
}

const inputType = (f: Field) => (f.kind === 'number' || f.kind === 'integer' ? 'number' : f.kind === 'date' ? 'datetime-local' : 'text');

function toInput(f: Field, v: unknown): string | boolean {
  if (f.kind === 'boolean') return !!v;
  if (v === null || v === undefined) return '';
  if (f.kind === 'array') return (v as unknown[]).map(String).join(', ');
  if (f.kind === 'date') return String(v).slice(0, 16);
  if (f.kind === 'mixed') return JSON.stringify(v);
  return String(v);
}

function fromInput(f: Field, v: string | boolean): unknown {
  if (f.kind === 'boolean') return v;
  const s = String(v);
  // An emptied list is an empty list, not null (which a list field refuses).
  if (s === '') return f.kind === 'array' ? [] : null;
  if (f.kind === 'number' || f.kind === 'integer') return Number(s);
  if (f.kind === 'array') return s.split(',').map((x) => x.trim()).filter(Boolean);
  if (f.kind === 'date') return new Date(`${s}Z`).toISOString();
  if (f.kind === 'mixed') {
    try {
      return JSON.parse(s);
    } catch {
      return s;
    }
  }
  return s;
}

function ResourceForm({ t, id }: { t: ResourceType; id?: string }) {
  const [values, setValues] = useState<Record<string, string | boolean> | null>(id ? null : Object.fromEntries(t.fields.map((f) => [f.name, toInput(f, null)])));
  const [etag, setEtag] = useState<string>('');
  const [error, setError] = useState<unknown>(null);
  const [saving, setSaving] = useState(false);
  const original = useAsync(async () => {
    if (!id) return null;
    const d = await getDoc(t, id, isAdmin(session.value?.user));
    if (d) {
      setValues(Object.fromEntries(t.fields.map((f) => [f.name, toInput(f, d[f.name])])));
      setEtag(d.etag);
    }
    return d;
  }, [id]);
  const issues = error instanceof ApiError && error.code === 'VALIDATION_ERROR' ? error.issues : [];
  const fieldIssue = (name: string) => issues.filter((i) => i.loc.includes(name)).map((i) => i.msg).join('; ');
  const stale = error instanceof ApiError && error.code === 'ETAG_MISMATCH';
  const submit = async (e: SubmitEvent) => {
    e.preventDefault();
    if (!values) return;
    // "Save draft" (resources with drafts) saves without publishing; the other button publishes.
    const draft = (e.submitter as HTMLButtonElement | null)?.value === 'draft';
    setSaving(true);
    setError(null);
    try {
      const input: Record<string, unknown> = {};
      for (const f of t.fields) {
        const v = fromInput(f, values[f.name] ?? '');
        if (id || (v !== null && !(Array.isArray(v) && !v.length))) input[f.name] = v;
      }
      const saved = id ? await updateDoc(t, id, etag, input, draft) : await createDoc(t, input, draft);
      toast(draft ? 'Draft saved: readers still see the published version' : id ? `${singular(t)} saved` : `${singular(t)} created`);
      go(`/resources/${t.name}/${saved._id}`);
    } catch (err) {
      setError(err);
    } finally {
      setSaving(false);
    }
  };
  return (
    <section aria-labelledby="h-form">
      <h2 id="h-form">{id ? `Edit ${singular(t)} ${id}` : `New ${singular(t)}`}</h2>
      <Loading when={original.loading || saving} />
      <ErrorBox error={original.error} />
      {stale && (
        <div class="error" role="alert" data-testid="stale">
          <strong>Someone else changed this document since you opened it</strong> (412, ETAG_MISMATCH
          {error instanceof ApiError && error.requestId ? `, request_id ${error.requestId}` : ''}). Your edits were not saved.{' '}
          <button type="button" onClick={() => { setError(null); original.reload(); }}>Reload the current version</button>
        </div>
      )}
      {error && !stale && <ErrorBox error={issues.length ? new ApiError('Some fields are not valid: see the messages next to them', 'VALIDATION_ERROR', 422, {}, (error as ApiError).requestId) : error} />}
      {values && (
        <form onSubmit={submit} noValidate>
          {t.fields.map((f) => {
            const msg = fieldIssue(f.name);
            const fid = `fld-${f.name}`;
            const common = { id: fid, 'aria-invalid': msg ? true : undefined, 'aria-describedby': msg ? `${fid}-err` : undefined };
            return (
              <div class="row" key={f.name}>
                <label for={fid}>
                  {f.name}
                  {f.required ? ' (required)' : ''}
                  {f.kind === 'array' ? ' (comma-separated)' : ''}
                </label>
                {f.kind === 'boolean' ? (
                  <input type="checkbox" {...common} checked={!!values[f.name]} onChange={(e) => setValues({ ...values, [f.name]: e.currentTarget.checked })} />
                ) : f.enum ? (
                  <select {...common} value={String(values[f.name])} onChange={(e) => setValues({ ...values, [f.name]: e.currentTarget.value })}>
                    <option value="">(none)</option>
                    {f.enum.map((o) => <option key={o} value={o}>{o}</option>)}
                  </select>
                ) : (
                  <input type={inputType(f)} {...common} value={String(values[f.name])} step={f.kind === 'number' ? 'any' : undefined} onInput={(e) => setValues({ ...values, [f.name]: e.currentTarget.value })} />
                )}
                {msg && <span class="field-error" id={`${fid}-err`}>{msg}</span>}
              </div>
            );
          })}
          <p class="actions">
            <button type="submit" value="publish" disabled={saving}>{id ? (t.drafts ? 'Save and publish' : 'Save') : t.drafts ? 'Create and publish' : 'Create'}</button>
            {t.drafts && <button type="submit" value="draft" disabled={saving}>Save draft</button>}
            <a href={id ? `#/resources/${t.name}/${id}` : `#/resources/${t.name}`}>Cancel</a>
          </p>
        </form>
      )}
    </section>
  );
}
