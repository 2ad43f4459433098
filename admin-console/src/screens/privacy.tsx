/**
 * Privacy: consents per user (everyone: their own; administrators: any user of their tenant), a
 * user's data export downloaded as JSON, and erasure requests (administrators): preview what
 * will be depersonalized, then approve and execute while the progress shows live (the erasure
 * job's `jobRun` subscription).
 */
import { useState } from 'preact/hooks';
import { isAdmin, run, session } from '../api.ts';
import { graphql, type ResultOf } from '../graphql.ts';
import { Users } from '../graphql.ts';
import { useLive } from '../live.ts';
import { ConfirmDialog, download, Empty, ErrorBox, Time, Loading, Notice, Progress, useAction, useAsync } from '../ui.tsx';

const Consents = graphql(`query Consents($user_id: String) { consents(user_id: $user_id, per_page: 100) { items { id purpose source active granted_at revoked_at } } }`);
const ExportQ = graphql(`query Export($user_id: String!) { personalDataExport(user_id: $user_id) { filename data } }`);
const Requests = graphql(`
  query ErasureRequests { erasureRequests(per_page: 50) { items { id user_id status created_at completed_at error job_run_id preview { account api_keys consents collections { name action count fields } } result { documents_depersonalized documents_deleted consents_revoked api_keys_revoked audit_entries_scrubbed account_disabled } } } }
`);
const RequestErasure = graphql(`mutation RequestErasure($user_id: String!) { requestErasure(user_id: $user_id) { id } }`);
const Execute = graphql(`mutation ExecuteErasure($id: String!) { executeErasure(id: $id) { queued request { id status job_run_id } } }`);
const RunLive = graphql(`subscription ErasureRun($id: String!) { jobRun(id: $id) { event status percentage progress_message } }`);
type Req = ResultOf<typeof Requests>['erasureRequests']['items'][number];

export default function PrivacyScreen() {
  const me = session.value!.user;
  const admin = isAdmin(me);
  const users = useAsync(() => (admin ? run(Users, {}).then((r) => r.users) : Promise.resolve([{ id: me.id, email: me.email }])), [admin]);
  const [userId, setUserId] = useState(me.id);
  const consents = useAsync(() => run(Consents, { user_id: admin && userId !== me.id ? userId : null }).then((r) => r.consents.items), [userId]);
  const { error, act } = useAction();
  const email = users.data?.find((u) => u.id === userId)?.email ?? userId;
  return (
    <>
      <h1>Privacy</h1>
      <ErrorBox error={error ?? users.error} />
      {admin && (
        <div class="filters">
          <div class="row">
            <label for="pv-user">User</label>
            <select id="pv-user" value={userId} onChange={(e) => setUserId(e.currentTarget.value)}>
              {(users.data ?? []).map((u) => <option key={u.id} value={u.id}>{u.email}</option>)}
            </select>
          </div>
        </div>
      )}
      <section aria-labelledby="h-consents">
        <h2 id="h-consents">Consents of {email}</h2>
        <Loading when={consents.loading} />
        <ErrorBox error={consents.error} />
        {!!consents.data?.length && <ul data-testid="consents">
          {consents.data.map((c) => <li key={c.id}>{c.purpose}: {c.active ? <>granted <Time v={c.granted_at} /></> : <>revoked <Time v={c.revoked_at} /></>} <small class="muted">({c.source})</small></li>)}
        </ul>}
        {consents.data?.length === 0 && <Empty>No consents recorded for {email}. A consent appears here when this person grants one, through the API or a form of your application.</Empty>}
      </section>
      <section aria-labelledby="h-export">
        <h2 id="h-export">Data export</h2>
        <button type="button" onClick={() => act(async () => {
          const r = (await run(ExportQ, { user_id: userId })).personalDataExport;
          download(r.filename, 'application/json', JSON.stringify(r.data, null, 2));
        })}>Download the data of {email}</button>
      </section>
      {admin && <Erasure userId={userId} email={email} />}
    </>
  );
}

function Erasure({ userId, email }: { userId: string; email: string }) {
  const list = useAsync(() => run(Requests).then((r) => r.erasureRequests.items), []);
  const [asking, setAsking] = useState(false);
  return (
    <section aria-labelledby="h-erasure">
      <h2 id="h-erasure">Erasure requests</h2>
      <ErrorBox error={list.error} />
      <button type="button" onClick={() => setAsking(true)}>Preview the erasure of {email}…</button>
      {asking && (
        <ConfirmDialog title={`Prepare the erasure of ${email}?`} confirmLabel="Prepare the erasure" onClose={() => setAsking(false)} onConfirm={async () => { await run(RequestErasure, { user_id: userId }); list.reload(); }}>
          This records an erasure request with a preview of what it would change. Nothing is erased until it is approved.
        </ConfirmDialog>
      )}
      <Loading when={list.loading} />
      {(list.data ?? []).map((r) => <RequestCard key={r.id} r={r} reload={list.reload} />)}
    </section>
  );
}

function RequestCard({ r, reload }: { r: Req; reload: () => void }) {
  const [approving, setApproving] = useState(false);
  const [runId, setRunId] = useState<string | null>(r.status === 'running' || r.status === 'pending' ? r.job_run_id : null);
  const [pct, setPct] = useState<number | null>(null);
  useLive(RunLive, runId ? { id: runId } : null, ({ jobRun: u }) => {
    if (u.percentage != null) setPct(u.percentage);
    if (u.event === 'end') {
      setPct(u.status === 'completed' ? 100 : (pct ?? 0));
      reload();
    }
  }, [runId]);
  return (
    <article class="notice-card" data-testid="erasure-request" aria-label={`Erasure of user ${r.user_id}`}>
      <h3>User <code>{r.user_id}</code>: <span data-testid="erasure-status">{r.status}</span></h3>
      <p class="muted">Requested <Time v={r.created_at} />{r.completed_at && <> · completed <Time v={r.completed_at} /></>}</p>
      <p>Preview: account {r.preview.account ? 'disabled and depersonalized' : 'not touched'}, {r.preview.api_keys} API key(s) revoked, {r.preview.consents} consent(s) revoked.</p>
      <table data-testid="erasure-preview">
        <caption class="sr-only">What will be erased</caption>
        <thead><tr><th scope="col">Collection</th><th scope="col">Action</th><th scope="col">Documents</th><th scope="col">Fields</th></tr></thead>
        <tbody>{r.preview.collections.map((c) => <tr key={c.name}><td>{c.name}</td><td>{c.action}</td><td>{c.count}</td><td>{c.fields.join(', ')}</td></tr>)}</tbody>
      </table>
      {(runId || pct !== null) && <Progress value={pct ?? 0} label={`Progress of the erasure of ${r.user_id}`} />}
      {r.result && (
        <Notice>
          Done: {r.result.documents_depersonalized} document(s) depersonalized, {r.result.documents_deleted} deleted, {r.result.consents_revoked} consent(s) and {r.result.api_keys_revoked} API key(s) revoked, {r.result.audit_entries_scrubbed} audit entries scrubbed{r.result.account_disabled ? ', account disabled' : ''}.
        </Notice>
      )}
      {r.error && <div class="error" role="alert">{r.error}</div>}
      {(r.status === 'pending' || r.status === 'failed') && (
        <button type="button" onClick={() => setApproving(true)}>Approve and execute…</button>
      )}
      {approving && (
        <ConfirmDialog title="Approve and execute this erasure?" confirmLabel="Approve and execute" onClose={() => setApproving(false)} onConfirm={async () => {
          const x = (await run(Execute, { id: r.id })).executeErasure;
          if (x.queued && x.request.job_run_id) { setPct(0); setRunId(x.request.job_run_id); } else setPct(100);
          reload();
        }}>
          The user's personal data is depersonalized or deleted as previewed. It cannot be undone.
        </ConfirmDialog>
      )}
    </article>
  );
}
