/**
 * Jobs: the registry with a trigger form generated from each job's parameters (the server's
 * validation errors next to their fields), runs with filters (live: every `job_run.*` event, so runs
 * others start, and each run's start and end, reload the list),
 * and a run's live view through the `jobRun` subscription (progress bar, log lines), with cancel.
 * Schedules and chains are in jobs-schedules.tsx.
 */
import { LazyPagePlot } from './page-plot.tsx';
import { useState } from 'preact/hooks';
import { isSystem, run, session } from '../api.ts';
import { graphql, type ResultOf } from '../graphql.ts';
import { useLive } from '../live.ts';
import { Empty, ErrorBox, fieldErrors, Time, go, Json, Loading, Pager, Progress, Tabs, useAction, useAsync } from '../ui.tsx';
import { ChainsView, SchedulesView } from './jobs-schedules.tsx';

const Registry = graphql(`query Registry { jobRegistry { name description params per_tenant timeout_seconds max_attempts plugin } }`);
const Trigger = graphql(`mutation Trigger($job: String!, $params: JSON) { triggerJob(job: $job, params: $params) { id } }`);
const Runs = graphql(`
  query Runs($filter: JobRunFilter, $page: Int) {
    jobRuns(filter: $filter, page: $page, per_page: 25) { total page total_pages items { id job_name status percentage created_at duration_ms trigger error } }
  }
`);
const RunQ = graphql(`
  query Run($id: String!) {
    jobRun(id: $id) { id job_name status percentage progress_message parameters result error created_at started_at completed_at attempt max_attempts logs { timestamp level message } }
  }
`);
const Cancel = graphql(`mutation CancelRun($id: String!) { cancelJobRun(id: $id) { id status } }`);
const RunLive = graphql(`subscription RunLive($id: String!) { jobRun(id: $id) { event status percentage progress_message result error log { timestamp level message } } }`);
const RunsLive = graphql(`subscription RunsLive { events(types: ["job_run.created", "job_run.started", "job_run.completed", "job_run.failed", "job_run.cancelled"]) { id } }`);
type Entry = ResultOf<typeof Registry>['jobRegistry'][number];
type ParamInfo = { type: string; required: boolean; description: string; enum?: unknown[] };

export default function JobsScreen({ route }: { route: string[] }) {
  const [tab = 'registry', id] = route;
  const system = isSystem(session.value?.user);
  const tabs: [string, string][] = [['/jobs/registry', 'Registry'], ['/jobs/runs', 'Runs'], ['/jobs/schedules', 'Schedules'], ...(system ? [['/jobs/chains', 'Chains'] as [string, string]] : [])];
  let body;
  if (tab === 'runs' && id) body = <RunView id={id} />;
  else if (tab === 'runs') body = <RunsList />;
  else if (tab === 'schedules') body = <SchedulesView />;
  else if (tab === 'chains' && system) body = <ChainsView />;
  else body = <RegistryView trigger={tab === 'trigger' ? id : undefined} />;
  return (
    <>
      <h1>Jobs</h1>
      <Tabs label="Jobs" current={`/jobs/${tab === 'trigger' ? 'registry' : tab}`} items={tabs} />
      {body}
    </>
  );
}

function RegistryView({ trigger }: { trigger?: string }) {
  const reg = useAsync(() => run(Registry).then((r) => r.jobRegistry), []);
  const job = reg.data?.find((j) => j.name === trigger);
  return (
    <>
      <Loading when={reg.loading} />
      <ErrorBox error={reg.error} />
      {job && <TriggerForm job={job} />}
      {job && <LazyPagePlot kind="job" job={job.name} needs="jobSeries" title={`Runs of ${job.name}`} />}
      {reg.data?.length === 0 && <Empty>No jobs are registered. A plugin registers its jobs when the server starts: turn on a plugin with jobs (webhooks, payments, privacy) to run them from here.</Empty>}
      {!!reg.data?.length && <table data-testid="registry">
        <caption class="sr-only">Registered jobs</caption>
        <thead><tr><th scope="col">Job</th><th scope="col">Parameters</th><th scope="col">Limits</th><th scope="col">Actions</th></tr></thead>
        <tbody>
          {(reg.data ?? []).map((j) => (
            <tr key={j.name}>
              <td><strong>{j.name}</strong><br /><small class="muted">{j.description} ({j.plugin}{j.per_tenant ? ', per tenant' : ''})</small></td>
              <td>{Object.entries(j.params as Record<string, ParamInfo>).map(([n, p]) => <div key={n}><code>{n}</code>: {p.type}{p.required ? ' (required)' : ''}{p.description ? ` – ${p.description}` : ''}</div>)}</td>
              <td>{j.timeout_seconds} s, {j.max_attempts} attempt(s)</td>
              <td><a class="button" href={`#/jobs/trigger/${j.name}`}>Run {j.name}…</a></td>
            </tr>
          ))}
        </tbody>
      </table>}
    </>
  );
}

function TriggerForm({ job }: { job: Entry }) {
  const params = Object.entries(job.params as Record<string, ParamInfo>);
  const [values, setValues] = useState<Record<string, string>>({});
  const { error, busy, act } = useAction();
  const errs = fieldErrors(error);
  const convert = (p: ParamInfo, v: string): unknown => {
    if (p.type === 'integer' || p.type === 'number') return v.trim() === '' || isNaN(Number(v)) ? v : Number(v);
    if (p.type === 'boolean') return v === 'true';
    if (p.type === 'object' || p.type === 'array') { try { return JSON.parse(v); } catch { return v; } }
    return v;
  };
  const submit = (e: Event) => {
    e.preventDefault();
    const out: Record<string, unknown> = {};
    for (const [n, p] of params) if ((values[n] ?? '') !== '') out[n] = convert(p, values[n]!);
    void act(async () => {
      const r = await run(Trigger, { job: job.name, params: out });
      go(`/jobs/runs/${r.triggerJob.id}`);
    });
  };
  return (
    <form class="filters" aria-label={`Run ${job.name}`} onSubmit={submit} noValidate>
      <h2>Run {job.name}</h2>
      {params.length === 0 && <p class="muted">This job takes no parameters.</p>}
      {params.map(([n, p]) => {
        const id = `jp-${n}`;
        const err = errs[n];
        const common = { id, 'aria-invalid': err ? ('true' as const) : undefined, 'aria-describedby': err ? `${id}-err` : undefined };
        return (
          <div class="row" key={n}>
            <label for={id}>{n}{p.required ? ' (required)' : ''} <small class="muted">{p.type}</small></label>
            {p.enum ? (
              <select {...common} value={values[n] ?? ''} onChange={(e) => setValues({ ...values, [n]: e.currentTarget.value })}>
                <option value="">(none)</option>
                {p.enum.map((o) => <option key={String(o)}>{String(o)}</option>)}
              </select>
            ) : p.type === 'boolean' ? (
              <select {...common} value={values[n] ?? ''} onChange={(e) => setValues({ ...values, [n]: e.currentTarget.value })}>
                <option value="">(default)</option><option>true</option><option>false</option>
              </select>
            ) : (
              <input {...common} inputMode={p.type === 'integer' || p.type === 'number' ? 'numeric' : undefined} value={values[n] ?? ''} onInput={(e) => setValues({ ...values, [n]: e.currentTarget.value })} />
            )}
            {p.description && <small class="muted">{p.description}</small>}
            {err && <span id={`${id}-err`} class="field-error">{err}</span>}
          </div>
        );
      })}
      <ErrorBox error={error} />
      <button type="submit" disabled={busy}>Run now</button>
    </form>
  );
}

function RunsList() {
  const [f, setF] = useState({ job_name: '', status: '' });
  const [applied, setApplied] = useState(f);
  const [page, setPage] = useState(1);
  const runs = useAsync(() => run(Runs, { filter: { job_name: applied.job_name || null, status: applied.status || null }, page }).then((r) => r.jobRuns), [applied, page]);
  useLive(RunsLive, {}, () => runs.reload(), []);
  return (
    <>
      <form class="filters" aria-label="Filter runs" onSubmit={(e) => { e.preventDefault(); setPage(1); setApplied(f); }}>
        <div class="row"><label for="r-job">Job</label><input id="r-job" value={f.job_name} onInput={(e) => setF({ ...f, job_name: e.currentTarget.value })} /></div>
        <div class="row">
          <label for="r-status">Status</label>
          <select id="r-status" value={f.status} onChange={(e) => setF({ ...f, status: e.currentTarget.value })}>
            <option value="">(any)</option>
            {['pending', 'running', 'completed', 'failed', 'cancelled'].map((s) => <option key={s}>{s}</option>)}
          </select>
        </div>
        <button type="submit">Apply</button>
        <button type="button" onClick={runs.reload}>Refresh</button>
      </form>
      <Loading when={runs.loading} />
      <ErrorBox error={runs.error} />
      <table data-testid="runs">
        <caption class="sr-only">Runs</caption>
        <thead><tr><th scope="col">Run</th><th scope="col">Status</th><th scope="col">Progress</th><th scope="col">Created</th><th scope="col">Duration</th></tr></thead>
        <tbody>
          {(runs.data?.items ?? []).map((r) => (
            <tr key={r.id}>
              <td><a href={`#/jobs/runs/${r.id}`}>{r.job_name}</a><br /><small class="muted">{r.trigger}</small></td>
              <td>{r.status}{r.error ? `: ${r.error}` : ''}</td>
              <td>{r.percentage ?? 0}%</td>
              <td><Time v={r.created_at} /></td>
              <td>{r.duration_ms != null ? `${r.duration_ms} ms` : ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <Pager label="Pages of runs" page={page} totalPages={runs.data?.total_pages ?? 1} onPage={setPage} />
    </>
  );
}

type Log = { timestamp: string; level: string; message: string };

/** One run, live: its progress bar and log lines follow the `jobRun` subscription until it ends. */
export function RunView({ id }: { id: string }) {
  const base = useAsync(() => run(RunQ, { id }).then((r) => r.jobRun), [id]);
  const [live, setLive] = useState<{ status?: string; percentage?: number; message?: string | null; result?: unknown; error?: string | null; logs: Log[] }>({ logs: [] });
  const { error, act } = useAction();
  useLive(RunLive, { id }, ({ jobRun: u }) => {
    setLive((l) => ({
      ...l,
      ...(u.status ? { status: u.status } : {}),
      ...(u.percentage != null ? { percentage: u.percentage } : {}),
      ...(u.progress_message != null ? { message: u.progress_message } : {}),
      ...(u.event === 'end' ? { result: u.result, error: u.error } : {}),
      logs: u.log ? [...l.logs, u.log] : l.logs,
    }));
  }, [id]);
  const r = base.data;
  if (!r) return <><Loading when={base.loading} /><ErrorBox error={base.error} /></>;
  const status = live.status ?? r.status;
  const done = ['completed', 'failed', 'cancelled'].includes(status);
  const pct = status === 'completed' ? 100 : (live.percentage ?? r.percentage ?? 0);
  const logs = [...r.logs, ...live.logs].filter((l, i, all) => all.findIndex((x) => x.timestamp === l.timestamp && x.message === l.message) === i);
  return (
    <section aria-labelledby="run-h">
      <h2 id="run-h">Run of {r.job_name}</h2>
      <p>Status: <strong data-testid="run-status">{status}</strong> · attempt {r.attempt} of {r.max_attempts} · created <Time v={r.created_at} /></p>
      <Progress value={pct} label={`Progress of run ${r.id}`} />
      {(live.message ?? r.progress_message) && <p class="muted">{live.message ?? r.progress_message}</p>}
      <ErrorBox error={error} />
      {!done && <button type="button" onClick={() => act(() => run(Cancel, { id }), base.reload)}>Cancel run</button>}
      {(live.error ?? r.error) && <div class="error" role="alert">{live.error ?? r.error}</div>}
      <h3>Parameters</h3>
      <Json value={r.parameters} label="Parameters" />
      {done && (live.result ?? r.result) != null && <><h3>Result</h3><Json value={live.result ?? r.result} label="Result" /></>}
      <h3>Log</h3>
      <ol class="logs" data-testid="run-logs" tabIndex={0} aria-label="Log lines">
        {logs.map((l, i) => <li key={i}><small class="muted"><Time v={l.timestamp} /></small> [{l.level}] {l.message}</li>)}
      </ol>
    </section>
  );
}
