/** Audit log: filters, a readable diff of each update, stats, CSV and JSON export of the filtered entries. */
import { useState } from 'preact/hooks';
import { run } from '../api.ts';
import { AuditLog, AuditStats, type ResultOf } from '../graphql.ts';
import { download, ErrorBox, Time, Loading, Pager, show, useAsync } from '../ui.tsx';

type Entry = ResultOf<typeof AuditLog>['auditLog']['items'][number];
type Filters = { user_id?: string; resource?: string; operation?: string; date_from?: string; date_to?: string };

/** `changes` of an update as rows: field, before, after (the server stores `{field: {old, new}}` or a list). */
function diffRows(changes: unknown): [string, unknown, unknown][] {
  if (!changes || typeof changes !== 'object') return [];
  if (Array.isArray(changes)) return changes.map((c: { field?: string; path?: string; old?: unknown; new?: unknown; from?: unknown; to?: unknown }) => [c.field ?? c.path ?? '?', c.old ?? c.from, c.new ?? c.to]);
  return Object.entries(changes as Record<string, { old?: unknown; new?: unknown; from?: unknown; to?: unknown }>).map(([k, v]) =>
    v && typeof v === 'object' && ('old' in v || 'new' in v || 'from' in v) ? [k, v.old ?? v.from, v.new ?? v.to] : [k, undefined, v]);
}

const csvCell = (v: unknown) => `"${show(v).replace(/"/g, '""')}"`;
const toCsv = (items: Entry[]) =>
  ['created_at,operation,resource,item_id,user_id,user_name,changes', ...items.map((e) => [e.created_at, e.operation, e.resource, e.item_id, e.user_id, e.user_name, e.changes].map(csvCell).join(','))].join('\n');

/** Downloads every entry matching `filters` (up to 20,000) as CSV or JSON. */
async function exportEntries(filters: Filters, kind: 'csv' | 'json') {
  const items: Entry[] = [];
  for (let p = 1; p <= 40; p++) {
    const r = (await run(AuditLog, { ...filters, page: p, per_page: 500 })).auditLog;
    items.push(...r.items);
    if (p * r.per_page >= r.total) break;
  }
  if (kind === 'csv') download('audit-log.csv', 'text/csv', toCsv(items));
  else download('audit-log.json', 'application/json', JSON.stringify(items, null, 2));
}

export function AuditScreen() {
  const [form, setForm] = useState<Filters>({});
  const [filters, setFilters] = useState<Filters>({});
  const [page, setPage] = useState(1);
  const clean = Object.fromEntries(Object.entries(filters).filter(([, v]) => v)) as Filters;
  const log = useAsync(() => run(AuditLog, { ...clean, page, per_page: 25 }).then((r) => r.auditLog), [JSON.stringify(clean), page]);
  const stats = useAsync(() => run(AuditStats, { user_id: clean.user_id, resource: clean.resource, date_from: clean.date_from, date_to: clean.date_to }).then((r) => r.auditStats), [JSON.stringify(clean)]);
  const input = (k: keyof Filters, label: string, type = 'text') => (
    <div class="row">
      <label for={`a-${k}`}>{label}</label>
      <input id={`a-${k}`} type={type} value={form[k] ?? ''} onInput={(e) => setForm({ ...form, [k]: e.currentTarget.value })} />
    </div>
  );
  const [exportError, setExportError] = useState<unknown>(null);
  const exportAll = (kind: 'csv' | 'json') => exportEntries(clean, kind).then(() => setExportError(null), setExportError);
  return (
    <>
      <h1>Audit log</h1>
      <form class="filters" aria-label="Filter audit entries" onSubmit={(e) => { e.preventDefault(); setFilters(form); setPage(1); }}>
        {input('user_id', 'User id')}
        {input('resource', 'Resource')}
        <div class="row">
          <label for="a-operation">Operation</label>
          <select id="a-operation" value={form.operation ?? ''} onChange={(e) => setForm({ ...form, operation: e.currentTarget.value })}>
            <option value="">any</option>
            {['insert', 'update', 'replace', 'delete', 'depersonalize'].map((o) => <option key={o} value={o}>{o}</option>)}
          </select>
        </div>
        {input('date_from', 'From (date)', 'date')}
        {input('date_to', 'To (date)', 'date')}
        <div class="row">
          <button type="submit">Apply</button>
          <button type="button" onClick={() => void exportAll('csv')}>Export CSV</button>
          <button type="button" onClick={() => void exportAll('json')}>Export JSON</button>
        </div>
      </form>
      <ErrorBox error={exportError} />
      <section aria-labelledby="h-stats">
        <h2 id="h-stats">Stats</h2>
        <ErrorBox error={stats.error} />
        {stats.data && (
          <p data-testid="audit-stats">
            {stats.data.total_entries} entries · by operation: {Object.entries(stats.data.by_operation as Record<string, number>).map(([k, v]) => `${k} ${v}`).join(', ') || 'none'} · by resource:{' '}
            {Object.entries(stats.data.by_resource as Record<string, number>).map(([k, v]) => `${k} ${v}`).join(', ') || 'none'}
          </p>
        )}
      </section>
      <section aria-labelledby="h-entries">
        <h2 id="h-entries">Entries</h2>
        <Loading when={log.loading} />
        <ErrorBox error={log.error} />
        {log.data && (
          <>
            <ol class="entries" data-testid="audit-list">
              {log.data.items.map((e) => (
                <li key={e.id}>
                  <p>
                    <strong>{e.operation}</strong> {e.resource} <code>{e.item_id}</code> by {e.user_name ?? 'system'} ({e.user_id ?? '–'}), <Time v={e.created_at} />
                  </p>
                  {e.operation === 'update' && diffRows(e.changes).length > 0 && (
                    <table class="diff">
                      <caption class="sr-only">Changes</caption>
                      <thead><tr><th scope="col">Field</th><th scope="col">Before</th><th scope="col">After</th></tr></thead>
                      <tbody>
                        {diffRows(e.changes).map(([f, a, b]) => (
                          <tr key={f}><td>{f}</td><td><del>{show(a)}</del></td><td><ins>{show(b)}</ins></td></tr>
                        ))}
                      </tbody>
                    </table>
                  )}
                </li>
              ))}
            </ol>
            <Pager label="Pages" page={page} totalPages={Math.ceil(log.data.total / log.data.per_page)} onPage={setPage} />
          </>
        )}
      </section>
    </>
  );
}
