/**
 * Inbound webhooks (system administrators): received events by provider and status with their
 * payload, the dead-letter queue with retry of one or of the selected, and purge by retention.
 * The queue is live: each `webhook_event.failed` (an event enters it) and `webhook_event.recovered`
 * (one leaves it, also when another session retried it) reloads it.
 */
import { useState } from 'preact/hooks';
import { run } from '../api.ts';
import { graphql } from '../graphql.ts';
import { useLive } from '../live.ts';
import { ErrorBox, fmtDate, Time, Json, Loading, Notice, Tabs, useAction, useAsync } from '../ui.tsx';

const WebhookEvents = graphql(`query WebhookEvents($provider: String, $status: String) { webhookEvents(provider: $provider, status: $status, per_page: 50) { total items { id provider event_id event_type status error attempts retry_count created_at processed_at payload } } }`);
const DeadLetter = graphql(`query DeadLetter($provider: String) { webhookDeadLetter(provider: $provider, per_page: 50) { total items { id provider event_id event_type status error attempts retry_count created_at processed_at payload } } }`);
const RetryEvent = graphql(`mutation RetryEvent($id: String!) { retryWebhookEvent(event_id: $id) { id event_id status error } }`);
const Purge = graphql(`mutation Purge($days: Int) { purgeWebhookEvents(retention_days: $days) { deleted_count retention_days cutoff_date } }`);
const Failed = graphql(`subscription FailedWebhooks { events(types: ["webhook_event.failed", "webhook_event.recovered"]) { id } }`);

export default function InboundScreen({ route }: { route: string[] }) {
  const tab = route[0] === 'events' ? 'events' : 'dead-letter';
  return (
    <>
      <h1>Inbound webhooks</h1>
      <Tabs label="Inbound webhooks" current={`/inbound/${tab}`} items={[['/inbound/dead-letter', 'Dead-letter queue'], ['/inbound/events', 'All events']]} />
      {tab === 'events' ? <AllEvents /> : <DeadLetterQueue />}
    </>
  );
}

function AllEvents() {
  const [f, setF] = useState({ provider: '', status: '' });
  const [applied, setApplied] = useState(f);
  const [open, setOpen] = useState<string | null>(null);
  const { error, act } = useAction();
  const [purged, setPurged] = useState<string | null>(null);
  const [days, setDays] = useState('30');
  const list = useAsync(() => run(WebhookEvents, { provider: applied.provider || null, status: applied.status || null }).then((r) => r.webhookEvents), [applied]);
  return (
    <>
      <form class="filters" aria-label="Filter webhook events" onSubmit={(e) => { e.preventDefault(); setApplied(f); }}>
        <div class="row"><label for="in-provider">Provider</label><input id="in-provider" value={f.provider} onInput={(e) => setF({ ...f, provider: e.currentTarget.value })} /></div>
        <div class="row">
          <label for="in-status">Status</label>
          <select id="in-status" value={f.status} onChange={(e) => setF({ ...f, status: e.currentTarget.value })}>
            <option value="">(any)</option>
            {['received', 'processing', 'processed', 'failed'].map((s) => <option key={s}>{s}</option>)}
          </select>
        </div>
        <button type="submit">Apply</button>
      </form>
      <Loading when={list.loading} />
      <ErrorBox error={list.error ?? error} />
      <p>{list.data?.total ?? 0} event(s)</p>
      <table data-testid="inbound-events">
        <caption class="sr-only">Webhook events</caption>
        <thead><tr><th scope="col">Received</th><th scope="col">Provider</th><th scope="col">Event</th><th scope="col">Status</th><th scope="col">Payload</th></tr></thead>
        <tbody>
          {(list.data?.items ?? []).map((e) => (
            <tr key={e.id}>
              <td><Time v={e.created_at} /></td>
              <td>{e.provider}</td>
              <td><code>{e.event_id}</code> {e.event_type}</td>
              <td>{e.status}{e.error ? `: ${e.error}` : ''}</td>
              <td>
                <button type="button" aria-expanded={open === e.id} onClick={() => setOpen(open === e.id ? null : e.id)}>{open === e.id ? 'Hide' : 'Show'} payload of {e.event_id}</button>
                {open === e.id && <Json value={e.payload} label={`Payload of ${e.event_id}`} />}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <h2>Purge</h2>
      {purged && <Notice>{purged}</Notice>}
      <form class="inline-form" aria-label="Purge processed events" onSubmit={(e) => {
        e.preventDefault();
        void act(async () => {
          const r = (await run(Purge, { days: Number(days) })).purgeWebhookEvents;
          setPurged(`Deleted ${r.deleted_count} processed event(s) older than ${r.retention_days} days (before ${fmtDate(r.cutoff_date)}).`);
        }, list.reload);
      }}>
        <label for="purge-days">Keep processed events of the last (days)</label>
        <input id="purge-days" type="number" min={1} required value={days} onInput={(e) => setDays(e.currentTarget.value)} />
        <button type="submit">Purge</button>
      </form>
    </>
  );
}

function DeadLetterQueue() {
  const [provider, setProvider] = useState('');
  const [applied, setApplied] = useState('');
  const [sel, setSel] = useState<Set<string>>(new Set());
  const [open, setOpen] = useState<string | null>(null);
  const [outcome, setOutcome] = useState<string[]>([]);
  const { error, busy, act } = useAction();
  const list = useAsync(() => run(DeadLetter, { provider: applied || null }).then((r) => r.webhookDeadLetter), [applied]);
  useLive(Failed, {}, () => list.reload(), []);
  const retry = (ids: string[]) =>
    act(async () => {
      const out: string[] = [];
      for (const id of ids) {
        try {
          const r = (await run(RetryEvent, { id })).retryWebhookEvent;
          out.push(`${r.event_id}: ${r.status}${r.error ? ` (${r.error})` : ''}`);
        } catch (e) {
          out.push(`${id}: ${e instanceof Error ? e.message : String(e)}`);
        }
      }
      setOutcome(out);
      setSel(new Set());
    }, list.reload);
  const items = list.data?.items ?? [];
  return (
    <>
      <form class="filters" aria-label="Filter the dead-letter queue" onSubmit={(e) => { e.preventDefault(); setApplied(provider); }}>
        <div class="row"><label for="dlq-provider">Provider</label><input id="dlq-provider" value={provider} onInput={(e) => setProvider(e.currentTarget.value)} /></div>
        <button type="submit">Apply</button>
      </form>
      <Loading when={list.loading} />
      <ErrorBox error={list.error ?? error} />
      {outcome.length > 0 && <Notice><span data-testid="retry-outcome">Retried: {outcome.join('; ')}</span></Notice>}
      <p><span data-testid="dlq-total">{list.data?.total ?? 0}</span> failed event(s). <button type="button" disabled={!sel.size || busy} onClick={() => void retry([...sel])}>Retry selected ({sel.size})</button></p>
      <table data-testid="dead-letter">
        <caption class="sr-only">Dead-letter queue</caption>
        <thead><tr><th scope="col"><span class="sr-only">Select</span></th><th scope="col">Received</th><th scope="col">Provider</th><th scope="col">Event</th><th scope="col">Error</th><th scope="col">Actions</th></tr></thead>
        <tbody>
          {items.map((e) => (
            <tr key={e.id}>
              <td><input type="checkbox" aria-label={`Select ${e.event_id}`} checked={sel.has(e.id)} onChange={(ev) => { const s = new Set(sel); if (ev.currentTarget.checked) s.add(e.id); else s.delete(e.id); setSel(s); }} /></td>
              <td><Time v={e.created_at} /></td>
              <td>{e.provider}</td>
              <td><code>{e.event_id}</code> {e.event_type}<br /><small class="muted">{e.attempts} attempt(s)</small></td>
              <td>{e.error}</td>
              <td class="actions">
                <button type="button" disabled={busy} onClick={() => void retry([e.id])}>Retry {e.event_id}</button>
                <button type="button" aria-expanded={open === e.id} onClick={() => setOpen(open === e.id ? null : e.id)}>Payload</button>
                {open === e.id && <Json value={e.payload} label={`Payload of ${e.event_id}`} />}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}
