/**
 * A document's history on the Resources screen (resources that keep versions): its versions newest
 * first, a page at a time; one version as it was; the changes between two versions, field by
 * field; and a restore of an old version, asked for first and sent with the document's ETag.
 */
import { useState } from 'preact/hooks';
import { ApiError, session } from '../api.ts';
import type { ResourceType } from '../graphql.ts';
import { listVersions, restoreVersion, versionAt, versionDiff, type VersionEntry } from '../resources.ts';
import { Dialog, Empty, ErrorBox, fieldLabel, Loading, ShortId, Time, toast, useAsync, Value } from '../ui.tsx';

const OPERATION: Record<string, string> = { created: 'Created', updated: 'Edited', deleted: 'Deleted', restored: 'Restored' };

/** What a version's write was, in words. */
const operation = (e: VersionEntry) => (e.restored_from ? `Restored version ${e.restored_from}` : (OPERATION[e.operation] ?? e.operation));

/** The document's number of versions, from its ETag (`"3"` or `3`). */
export const versionOf = (etag: string): number => Number(String(etag).replace(/\D/g, '')) || 0;

function Who({ actor }: { actor: string | null }) {
  if (!actor) return <span class="muted">System</span>;
  if (actor === session.value?.user.id) return <>You</>;
  return <ShortId id={actor} label="user id" />;
}

/**
 * The History panel of document `id`, at `etag` (the panel reloads when it changes). `onChanged`
 * reloads the document: after a restore, and when a restore found it changed by someone else.
 * `mayRestore`: whether the server lets the user restore its versions (no Restore button otherwise).
 */
export function HistoryPanel({ t, id, etag, deleted, mayRestore, onChanged }: { t: ResourceType; id: string; etag: string; deleted: boolean; mayRestore: boolean; onChanged: () => void }) {
  const [older, setOlder] = useState<{ items: VersionEntry[]; next: number | null } | null>(null);
  const [loadingOlder, setLoadingOlder] = useState(false);
  const [olderError, setOlderError] = useState<unknown>(null);
  const [selected, setSelected] = useState<number | null>(null);
  const [stale, setStale] = useState(false);
  const first = useAsync(() => { setOlder(null); return listVersions(t, id); }, [id, etag]);
  const items = [...(first.data?.items ?? []), ...(older?.items ?? [])];
  const next = older ? older.next : (first.data?.next_before ?? null);
  const current = versionOf(etag);

  const loadOlder = async () => {
    if (next === null) return;
    setLoadingOlder(true);
    setOlderError(null);
    try {
      const page = await listVersions(t, id, next);
      setOlder({ items: [...(older?.items ?? []), ...page.items], next: page.next_before });
    } catch (e) {
      setOlderError(e);
    } finally {
      setLoadingOlder(false);
    }
  };

  return (
    <section aria-labelledby="h-history" class="history" data-testid="history">
      <h3 id="h-history">History</h3>
      <p class="muted">Every change to this document is kept as a version. Choose one to see it as it was, compare it with another, or restore it.</p>
      <Loading when={first.loading && !first.data} />
      <ErrorBox error={first.error} />
      {stale && (
        <div class="error" role="alert" data-testid="stale">
          <strong>Someone else changed this document since you opened it.</strong> Nothing was restored. Reload to see the current version, then restore again if you still want to.{' '}
          <button type="button" onClick={() => { setStale(false); onChanged(); }}>Reload the current version</button>
        </div>
      )}
      {first.data && !items.length && <Empty>No versions are kept for this document yet. Each create, edit, delete or restore adds one.</Empty>}
      {items.length > 0 && (
        <div class="scroll">
          <table data-testid="versions">
            <caption class="sr-only">Versions of this document, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Version</th>
                <th scope="col">Change</th>
                <th scope="col">When</th>
                <th scope="col">Who</th>
                <th scope="col">Changed fields</th>
                <th scope="col"><span class="sr-only">Actions</span></th>
              </tr>
            </thead>
            <tbody>
              {items.map((e) => (
                <tr key={e.version} class={selected === e.version ? 'chosen' : ''}>
                  <td>{e.version}{e.version === current ? <span class="pill">current</span> : null}</td>
                  <td>{operation(e)}</td>
                  <td><Time v={e.created_at} /></td>
                  <td><Who actor={e.actor} /></td>
                  <td>{e.changed_fields.length ? e.changed_fields.map(fieldLabel).join(', ') : <span class="muted">none</span>}</td>
                  <td>
                    <button type="button" aria-pressed={selected === e.version} onClick={() => setSelected(selected === e.version ? null : e.version)}>
                      {selected === e.version ? 'Hide' : 'View'}<span class="sr-only"> version {e.version}</span>
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <ErrorBox error={olderError} />
      {next !== null && (
        <p>
          <button type="button" aria-disabled={loadingOlder ? 'true' : undefined} onClick={() => !loadingOlder && void loadOlder()}>
            {loadingOlder ? 'Loading older versions…' : 'Show older versions'}
          </button>
        </p>
      )}
      {selected !== null && (
        <VersionView
          key={`${selected}-${etag}`} t={t} id={id} n={selected} etag={etag} current={current} deleted={deleted} mayRestore={mayRestore}
          choices={items.map((e) => e.version)}
          onRestored={() => { setSelected(null); onChanged(); }}
          onStale={() => setStale(true)}
        />
      )}
    </section>
  );
}

/** One version: the document as it was, its diff against another version, and its restore. */
function VersionView({ t, id, n, etag, current, deleted, mayRestore, choices, onRestored, onStale }: {
  t: ResourceType; id: string; n: number; etag: string; current: number; deleted: boolean; mayRestore: boolean; choices: number[]; onRestored: () => void; onStale: () => void;
}) {
  const [against, setAgainst] = useState<number | null>(null);
  const [asking, setAsking] = useState(false);
  const version = useAsync(() => versionAt(t, id, n), [n]);
  const diff = useAsync(() => versionDiff(t, id, n, against ?? undefined), [n, against]);
  const doc = version.data?.document;
  // The client fields only: what a restore brings back (a first version also lists the server's own).
  const changes = (diff.data?.changes ?? []).filter((c) => t.fields.some((f) => f.name === c.field.split('.')[0]));
  const others = choices.filter((v) => v !== n);
  return (
    <section aria-labelledby="h-version" data-testid="version">
      <h4 id="h-version">Version {n}{version.data ? <> · {operation(version.data)} <Time v={version.data.created_at} /></> : null}</h4>
      <Loading when={version.loading} />
      <ErrorBox error={version.error} />
      <div class="cols">
        <div>
          <h5>The document as it was</h5>
          {doc && (
            <dl class="detail" data-testid="version-document">
              {t.fields.map((f) => <div key={f.name}><dt>{fieldLabel(f.name)}</dt><dd>{f.kind === 'date' && doc[f.name] ? <Time v={doc[f.name]} /> : <Value v={doc[f.name]} />}</dd></div>)}
            </dl>
          )}
        </div>
        <div>
          <h5>Changes</h5>
          <div class="row">
            <label for="diff-against">Compared with</label>
            <select id="diff-against" value={against === null ? '' : String(against)} onChange={(e) => setAgainst(e.currentTarget.value ? Number(e.currentTarget.value) : null)}>
              <option value="">the version before</option>
              {others.map((v) => <option key={v} value={String(v)}>version {v}</option>)}
            </select>
          </div>
          <Loading when={diff.loading} />
          <ErrorBox error={diff.error} />
          {diff.data && (
            changes.length ? (
              <div class="scroll">
                <table class="diff" data-testid="diff">
                  <caption class="sr-only">{diff.data.against === null ? `Version ${n}: every field as set` : `From version ${diff.data.against} to version ${n}`}</caption>
                  <thead>
                    <tr>
                      <th scope="col">Field</th>
                      <th scope="col">{diff.data.against === null ? 'Before' : `Version ${diff.data.against}`}</th>
                      <th scope="col">Version {n}</th>
                    </tr>
                  </thead>
                  <tbody>
                    {changes.map((c) => (
                      <tr key={c.field}>
                        <th scope="row">{fieldLabel(c.field)}</th>
                        <td><del><Value v={c.before} /></del></td>
                        <td><ins><Value v={c.after} /></ins></td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            ) : (
              <Empty>No field differs{diff.data.against === null ? '' : ` between version ${diff.data.against} and version ${n}`}.</Empty>
            )
          )}
        </div>
      </div>
      {t.operations.restore_version && (
        <div class="actions">
          {n === current ? (
            <p class="muted">This is the current version.</p>
          ) : deleted ? (
            <p class="muted">Restore the document from deletion first; then its versions can be restored.</p>
          ) : mayRestore ? (
            <button type="button" onClick={() => setAsking(true)}>Restore version {n}…</button>
          ) : null}
        </div>
      )}
      {asking && <RestoreDialog t={t} id={id} n={n} etag={etag} current={current} document={doc} onClose={() => setAsking(false)} onRestored={onRestored} onStale={onStale} />}
    </section>
  );
}

/** Asks before a restore; says what went wrong in words (a unique value now taken names its field). */
function RestoreDialog({ t, id, n, etag, current, document, onClose, onRestored, onStale }: {
  t: ResourceType; id: string; n: number; etag: string; current: number; document: Record<string, unknown> | undefined; onClose: () => void; onRestored: () => void; onStale: () => void;
}) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    if (busy) return;
    setBusy(true);
    setError(null);
    try {
      const saved = await restoreVersion(t, id, n, etag);
      toast(`Version ${n} restored: it is now version ${versionOf(saved.etag) || current + 1}.`);
      onClose();
      onRestored();
    } catch (err) {
      if (err instanceof ApiError && err.code === 'ETAG_MISMATCH') {
        toast('Not restored: someone else changed this document.', 'bad');
        onClose();
        onStale();
        return;
      }
      if (err instanceof ApiError && err.code === 'CONFLICT' && typeof err.details.field === 'string') {
        const f = err.details.field;
        const value = document?.[f];
        setError(new ApiError(
          `Version ${n} cannot be restored: its ${fieldLabel(f).toLowerCase()}${value === undefined || value === null ? '' : ` "${String(value)}"`} is now used by another document. Change that document's ${fieldLabel(f).toLowerCase()} first, or edit this one instead.`,
          err.code, err.status, err.details, err.requestId,
        ));
      } else setError(err);
      toast(`Version ${n} was not restored.`, 'bad');
    } finally {
      setBusy(false);
    }
  };
  return (
    <Dialog title={`Restore version ${n}?`} onClose={onClose} testId="restore-dialog">
      <form onSubmit={submit}>
        <p>The document gets the values it had in version {n}, saved as a new version ({current + 1}). Nothing is lost: the current values stay in the history.</p>
        <ErrorBox error={error} />
        <p class="actions">
          <button type="button" onClick={onClose}>Cancel</button>
          <button type="submit" aria-disabled={busy ? 'true' : undefined}>{busy ? 'Restoring…' : `Restore version ${n}`}</button>
        </p>
      </form>
    </Dialog>
  );
}
