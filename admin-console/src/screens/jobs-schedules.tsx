/** Schedules (create, edit, the cron expression in words with its next five fire times, enable/disable, delete) and chains drawn as a graph with each step's state, live. */
import { useEffect, useState } from 'preact/hooks';
import { run } from '../api.ts';
import { graphql, type ResultOf } from '../graphql.ts';
import { useLive } from '../live.ts';
import { ConfirmDialog, ErrorBox, fieldErrors, Time, Loading, useAction, useAsync } from '../ui.tsx';

const Schedules = graphql(`
  query Schedules { jobSchedules { id job_name job_type description cron_expression timezone is_enabled parameters last_run_at last_run_status next_run_at next_fire_times } jobRegistry { name } }
`);
const Upsert = graphql(`mutation UpsertSchedule($id: String, $input: JSON!) { upsertJobSchedule(id: $id, input: $input) { id } }`);
const DeleteSchedule = graphql(`mutation DeleteSchedule($id: String!) { deleteJobSchedule(id: $id) }`);
const Preview = graphql(`query CronPreview($e: String!, $tz: String) { cronPreview(expression: $e, timezone: $tz, count: 5) { valid error description next } }`);
const Chains = graphql(`query Chains { jobChains { id name description is_system default_on_failure steps { job depends_on on_failure retries } } }`);
const ChainRuns = graphql(`query ChainRuns($name: String!) { jobRuns(filter: { job_name: $name }, per_page: 10) { items { id job_type chain_id status created_at } } }`);
const StepRuns = graphql(`query StepRuns($parent: String!) { jobRuns(filter: { parent_job_id: $parent }, per_page: 100) { items { id chain_index status } } }`);
const ChainLive = graphql(`subscription ChainLive { events(types: ["job_run.created", "job_run.started", "job_run.completed", "job_run.failed", "job_run.cancelled"]) { id data } }`);
type Schedule = ResultOf<typeof Schedules>['jobSchedules'][number];

const EMPTY = { job_name: '', job_type: '', cron_expression: '0 3 * * *', timezone: 'UTC', description: '', parameters: '{}', is_enabled: true };

export function SchedulesView() {
  const list = useAsync(() => run(Schedules), []);
  const [editing, setEditing] = useState<Schedule | 'new' | null>(null);
  const [deleting, setDeleting] = useState<Schedule | null>(null);
  const { error, act } = useAction();
  return (
    <>
      {deleting && (
        <ConfirmDialog title={`Delete schedule ${deleting.job_name}?`} confirmLabel="Delete schedule" onClose={() => setDeleting(null)} onConfirm={async () => { await run(DeleteSchedule, { id: deleting.id }); list.reload(); }}>
          It no longer starts {deleting.job_type}; runs it started are kept.
        </ConfirmDialog>
      )}
      <Loading when={list.loading} />
      <ErrorBox error={list.error ?? error} />
      <p><button type="button" onClick={() => setEditing('new')}>New schedule</button></p>
      {editing && <ScheduleForm key={editing === 'new' ? 'new' : editing.id} schedule={editing === 'new' ? null : editing} jobs={(list.data?.jobRegistry ?? []).map((j) => j.name)} done={() => { setEditing(null); list.reload(); }} />}
      <table data-testid="schedules">
        <caption class="sr-only">Schedules</caption>
        <thead><tr><th scope="col">Schedule</th><th scope="col">When</th><th scope="col">Next fire times</th><th scope="col">Last run</th><th scope="col">Actions</th></tr></thead>
        <tbody>
          {(list.data?.jobSchedules ?? []).map((s) => (
            <tr key={s.id}>
              <td><strong>{s.job_name}</strong> → {s.job_type}<br /><small class="muted">{s.description}</small></td>
              <td><code>{s.cron_expression}</code> ({s.timezone})<br />{s.is_enabled ? 'enabled' : 'disabled'}</td>
              <td><ul>{s.next_fire_times.map((t) => <li key={t}><Time v={t} /></li>)}</ul></td>
              <td>{s.last_run_at ? <><Time v={s.last_run_at} />: {s.last_run_status ?? ''}</> : 'never'}</td>
              <td class="actions">
                <button type="button" onClick={() => setEditing(s)}>Edit {s.job_name}</button>
                <button type="button" onClick={() => act(() => run(Upsert, { id: s.id, input: { is_enabled: !s.is_enabled } }), list.reload)}>{s.is_enabled ? 'Disable' : 'Enable'} {s.job_name}</button>
                <button type="button" onClick={() => setDeleting(s)}>Delete {s.job_name}…</button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

function ScheduleForm({ schedule, jobs, done }: { schedule: Schedule | null; jobs: string[]; done: () => void }) {
  const [f, setF] = useState(
    schedule
      ? { job_name: schedule.job_name, job_type: schedule.job_type ?? '', cron_expression: schedule.cron_expression, timezone: schedule.timezone, description: schedule.description ?? '', parameters: JSON.stringify(schedule.parameters), is_enabled: schedule.is_enabled }
      : EMPTY,
  );
  const [preview, setPreview] = useState<ResultOf<typeof Preview>['cronPreview'] | null>(null);
  const { error, busy, act, setError } = useAction();
  const errs = fieldErrors(error);
  useEffect(() => {
    const t = setTimeout(() => run(Preview, { e: f.cron_expression, tz: f.timezone }).then((r) => setPreview(r.cronPreview), () => setPreview(null)), 250);
    return () => clearTimeout(t);
  }, [f.cron_expression, f.timezone]);
  const field = (name: keyof typeof f, label: string, el?: 'select') => {
    const id = `sc-${name}`;
    const err = errs[name === 'cron_expression' ? 'cron_expression' : name];
    const props = { id, 'aria-invalid': err ? ('true' as const) : undefined, 'aria-describedby': err ? `${id}-err` : undefined };
    return (
      <div class="row">
        <label for={id}>{label}</label>
        {el === 'select' ? (
          <select {...props} value={String(f[name])} onChange={(e) => setF({ ...f, [name]: e.currentTarget.value })}>
            <option value="">choose…</option>
            {jobs.map((j) => <option key={j}>{j}</option>)}
          </select>
        ) : (
          <input {...props} value={String(f[name])} onInput={(e) => setF({ ...f, [name]: e.currentTarget.value })} />
        )}
        {err && <span id={`${id}-err`} class="field-error">{err}</span>}
      </div>
    );
  };
  const submit = (e: Event) => {
    e.preventDefault();
    let parameters: unknown;
    try {
      parameters = JSON.parse(f.parameters || '{}');
    } catch {
      return setError(new Error('Parameters must be JSON'));
    }
    const input = { job_name: f.job_name, job_type: f.job_type, cron_expression: f.cron_expression, timezone: f.timezone, description: f.description || null, parameters, is_enabled: f.is_enabled };
    void act(() => run(Upsert, { id: schedule?.id ?? null, input }), done);
  };
  return (
    <form class="filters" aria-label={schedule ? `Edit schedule ${schedule.job_name}` : 'New schedule'} onSubmit={submit}>
      <h2>{schedule ? `Edit schedule ${schedule.job_name}` : 'New schedule'}</h2>
      {field('job_name', 'Schedule name')}
      {field('job_type', 'Job', 'select')}
      {field('cron_expression', 'Cron expression')}
      {field('timezone', 'Time zone')}
      {field('description', 'Description')}
      {field('parameters', 'Parameters (JSON)')}
      <label class="inline" for="sc-enabled"><input id="sc-enabled" type="checkbox" checked={f.is_enabled} onChange={(e) => setF({ ...f, is_enabled: e.currentTarget.checked })} /> Enabled</label>
      <div class="row" data-testid="cron-preview" aria-live="polite">
        {preview && (preview.valid ? (
          <>
            <strong>{preview.description}</strong>
            <span>Next five fire times:</span>
            <ol>{preview.next.map((t) => <li key={t}><Time v={t} /></li>)}</ol>
          </>
        ) : <span class="field-error">{preview.error}</span>)}
      </div>
      <ErrorBox error={error} />
      <button type="submit" disabled={busy}>Save schedule</button>
      <button type="button" onClick={done}>Close</button>
    </form>
  );
}

/** Each chain's steps as boxes in columns by depth, with arrows for `depends_on`, and the state of each step in the chain's latest run. */
export function ChainsView() {
  const chains = useAsync(() => run(Chains).then((r) => r.jobChains), []);
  return (
    <>
      <Loading when={chains.loading} />
      <ErrorBox error={chains.error} />
      {chains.data?.length === 0 && <p>No chains yet (create them with POST /jobs/chains).</p>}
      {(chains.data ?? []).map((c) => <ChainGraph key={c.id} chain={c} />)}
    </>
  );
}

type Chain = ResultOf<typeof Chains>['jobChains'][number];

type ChainRun = { id: string; status: string; created_at: string; steps: Map<number, string> };
/** A run as its `job_run.*` event carries it (the fields used here). */
type RunEvent = { id: string; job_type: string; status: string; created_at: string; chain_id: string | null; parent_job_id: string | null; chain_index: number | null };

/** The chain's latest coordinating run (its `job_name` is the chain's name) and the status of each step's run. */
async function latestRun(c: Chain): Promise<ChainRun | null> {
  const last = (await run(ChainRuns, { name: c.name })).jobRuns.items.find((r) => r.job_type === 'chain' && r.chain_id === c.id);
  if (!last) return null;
  const steps = (await run(StepRuns, { parent: last.id })).jobRuns.items;
  return { id: last.id, status: last.status, created_at: last.created_at, steps: new Map(steps.filter((r) => r.chain_index != null).map((r): [number, string] => [r.chain_index!, r.status])) };
}

/** `cur` after one `job_run.*` event of the chain: a newer run of it replaces it, a step's event sets that step's state. */
function applyRunEvent(cur: ChainRun | null, e: RunEvent): ChainRun | null {
  if (e.job_type === 'chain' && !e.parent_job_id) {
    if (cur && e.id === cur.id) return { ...cur, status: e.status };
    return !cur || e.created_at >= cur.created_at ? { id: e.id, status: e.status, created_at: e.created_at, steps: new Map() } : cur;
  }
  if (cur && e.parent_job_id === cur.id && e.chain_index != null) return { ...cur, steps: new Map(cur.steps).set(e.chain_index, e.status) };
  return cur;
}

function ChainGraph({ chain: c }: { chain: Chain }) {
  const latest = useAsync(() => latestRun(c), [c.id]);
  // Live: each job_run event of this chain (its run or a step's: created, started, ended) carries the
  // run, so the states are updated from the events themselves, in their order, without a query each.
  const [live, setLive] = useState<{ run: ChainRun | null } | null>(null);
  useLive(ChainLive, {}, (d) => {
    const e = d.events.data as RunEvent;
    if (e.chain_id === c.id) setLive((l) => ({ run: applyRunEvent(l ? l.run : (latest.data ?? null), e) }));
  }, [c.id]);
  const depth = new Map<string, number>();
  const d = (job: string, seen: Set<string> = new Set()): number => {
    if (depth.has(job)) return depth.get(job)!;
    if (seen.has(job)) return 0;
    seen.add(job);
    const step = c.steps.find((s) => s.job === job);
    const v = step && step.depends_on.length ? 1 + Math.max(...step.depends_on.map((p) => d(p, seen))) : 0;
    depth.set(job, v);
    return v;
  };
  c.steps.forEach((s) => d(s.job));
  const cols: string[][] = [];
  for (const s of c.steps) (cols[depth.get(s.job)!] ??= []).push(s.job);
  const pos = new Map<string, { x: number; y: number }>();
  cols.forEach((col, i) => col.forEach((job, j) => pos.set(job, { x: 10 + i * 200, y: 10 + j * 60 })));
  const w = 10 + cols.length * 200;
  const h = 20 + Math.max(...cols.map((col) => col.length)) * 60;
  const r = live ? live.run : latest.data;
  const state = (i: number) => (r ? (r.steps.get(i) ?? 'not started') : '');
  return (
    <section aria-labelledby={`ch-${c.id}`}>
      <h2 id={`ch-${c.id}`}>{c.name}{c.is_system ? ' (built-in)' : ''}</h2>
      <p class="muted">{c.description} · on failure: {c.default_on_failure}</p>
      <p data-testid="chain-run">{r ? <>Latest run: <a href={`#/jobs/runs/${r.id}`}>{r.status}</a> · <Time v={r.created_at} /></> : 'Not run yet'}</p>
      <svg class="graph" width={w} height={h} viewBox={`0 0 ${w} ${h}`} role="img" aria-label={`Steps of ${c.name}: ${c.steps.map((s) => `${s.job}${s.depends_on.length ? ` after ${s.depends_on.join(' and ')}` : ''}`).join('; ')}`}>
        {c.steps.flatMap((s) => s.depends_on.map((p) => {
          const a = pos.get(p);
          const b = pos.get(s.job)!;
          return a ? <path key={`${p}-${s.job}`} d={`M${a.x + 160},${a.y + 22} C${a.x + 180},${a.y + 22} ${b.x - 20},${b.y + 22} ${b.x},${b.y + 22}`} marker-end="url(#arrow)" /> : null;
        }))}
        <defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z" /></marker></defs>
        {c.steps.map((s, i) => {
          const p = pos.get(s.job)!;
          return (
            <g key={s.job} class={`step ${state(i).replace(' ', '-')}`} data-testid="chain-step" data-step={s.job} data-state={state(i)}>
              <rect x={p.x} y={p.y} width={160} height={44} rx={6} />
              <text x={p.x + 10} y={p.y + 19}>{s.job}</text>
              <text class="state" x={p.x + 10} y={p.y + 36}>{state(i)}</text>
            </g>
          );
        })}
      </svg>
    </section>
  );
}
