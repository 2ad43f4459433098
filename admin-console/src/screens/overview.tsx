import { isAdmin, run, session } from '../api.ts';
import { AuditLog, Health } from '../graphql.ts';
import { countDocs, resourceTypes } from '../resources.ts';
import { ErrorBox, Time, Loading, useAsync, waitFor } from '../ui.tsx';
import { useEffect, useState } from 'preact/hooks';
import type { ComponentType } from 'preact';
import { rootFields } from '../caps.ts';

/** The plots and uPlot: their own chunk, loaded with the overview (administrators, when the server keeps the series). */
function LazyPlots() {
  const [Plots, setPlots] = useState<ComponentType | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => { waitFor(import('./charts.tsx')).then((m) => setPlots(() => m.default), setError); }, []);
  if (error) return <ErrorBox error={error} />;
  return Plots ? <Plots /> : <Loading when />;
}

/** Health (administrators), counts per resource, recent audit entries (administrators). */
export function Overview() {
  const admin = isAdmin(session.value?.user);
  const health = useAsync(() => (admin ? run(Health).then((r) => r.health) : Promise.resolve(null)), [admin]);
  const counts = useAsync(async () => {
    const types = await resourceTypes();
    return { types, counts: await countDocs(types) };
  }, []);
  const audit = useAsync(() => (admin ? run(AuditLog, { per_page: 5 }).then((r) => r.auditLog.items) : Promise.resolve([])), [admin]);
  return (
    <>
      <h1>Overview</h1>
      {admin && rootFields.value?.has('metricsOverview') && <LazyPlots />}
      {admin && (
        <section aria-labelledby="h-health">
          <h2 id="h-health">Health</h2>
          <Loading when={health.loading} />
          <ErrorBox error={health.error} />
          {health.data && (
            <>
              <p>
                Status: <strong data-testid="health-status" class={health.data.status === 'ok' ? 'ok' : 'bad'}>{health.data.status}</strong>
              </p>
              <table>
                <caption class="sr-only">Health checks</caption>
                <thead><tr><th scope="col">Check</th><th scope="col">Status</th><th scope="col">Duration</th></tr></thead>
                <tbody>
                  {health.data.checks.map((c) => (
                    <tr key={c.name}><td>{c.name}</td><td>{c.status}</td><td>{c.duration_ms} ms</td></tr>
                  ))}
                </tbody>
              </table>
            </>
          )}
        </section>
      )}
      <section aria-labelledby="h-counts">
        <h2 id="h-counts">Resources</h2>
        <Loading when={counts.loading} />
        <ErrorBox error={counts.error} />
        {counts.data && (
          <ul class="cards" data-testid="counts">
            {counts.data.types.filter((t) => t.accessible).map((t) => (
              <li key={t.name}>
                <a href={`#/resources/${t.name}`}>
                  <span class="count">{counts.data!.counts[t.name] ?? '–'}</span> {t.name}
                </a>
              </li>
            ))}
          </ul>
        )}
      </section>
      {admin && (
        <section aria-labelledby="h-audit">
          <h2 id="h-audit">Recent changes</h2>
          <Loading when={audit.loading} />
          <ErrorBox error={audit.error} />
          <ul>
            {(audit.data ?? []).map((e) => (
              <li key={e.id}>
                <Time v={e.created_at} />: {e.user_name ?? 'system'} {e.operation} {e.resource} <code>{e.item_id}</code>
              </li>
            ))}
          </ul>
          <a href="#/audit">All audit entries</a>
        </section>
      )}
    </>
  );
}
