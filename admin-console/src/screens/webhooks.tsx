/**
 * Outbound webhook endpoints: create (the secret is shown once), edit event types, disable/enable,
 * rotate the secret, send a test; per endpoint its deliveries with every attempt, and retry.
 * Deliveries update live: every event the endpoint listens to, and every recorded attempt
 * (`webhook_delivery.*` events), reloads them.
 */
import { LazyPagePlot } from './page-plot.tsx';
import { useState } from 'preact/hooks';
import { run } from '../api.ts';
import { graphql, type ResultOf } from '../graphql.ts';
import { useLive } from '../live.ts';
import { ConfirmDialog, Crumbs, Empty, ErrorBox, fieldErrors, Loading, Notice, Time, toast, useAction, useAsync } from '../ui.tsx';

const Endpoints = graphql(`query Endpoints { webhookEndpoints(per_page: 100) { items { id url description event_types enabled disabled_reason secret_rotated_at created_at } } eventTypes { name outbound } }`);
const CreateEndpoint = graphql(`mutation CreateEndpoint($url: String!, $event_types: [String!]!, $description: String) { createWebhookEndpoint(url: $url, event_types: $event_types, description: $description) { secret endpoint { id } } }`);
const UpdateEndpoint = graphql(`mutation UpdateEndpoint($id: ID!, $event_types: [String!], $enabled: Boolean) { updateWebhookEndpoint(id: $id, event_types: $event_types, enabled: $enabled) { id enabled event_types } }`);
const RotateSecret = graphql(`mutation RotateSecret($id: ID!) { rotateWebhookEndpointSecret(id: $id) { secret } }`);
const TestEndpoint = graphql(`mutation TestEndpoint($id: ID!) { testWebhookEndpoint(id: $id) { id status } }`);
const DeleteEndpoint = graphql(`mutation DeleteEndpoint($id: ID!) { deleteWebhookEndpoint(id: $id) }`);
const Deliveries = graphql(`
  query Deliveries($id: ID!, $status: String) {
    webhookDeliveries(endpoint_id: $id, status: $status, per_page: 50) {
      total items { id event_id event_type status attempts created_at next_attempt_at attempt_log { status duration_ms error response_excerpt attempted_at } }
    }
  }
`);
const RetryDelivery = graphql(`mutation RetryDelivery($endpoint_id: ID!, $delivery_id: ID!) { retryWebhookDelivery(endpoint_id: $endpoint_id, delivery_id: $delivery_id) { id status attempts } }`);
const AnyEvent = graphql(`subscription AnyEvent($types: [String!]) { events(types: $types) { id type } }`);
const DeliveryChanged = graphql(`subscription DeliveryChanged { events(types: ["webhook_delivery.succeeded", "webhook_delivery.failed"]) { id data } }`);
type Endpoint = ResultOf<typeof Endpoints>['webhookEndpoints']['items'][number];

/** `*` in words. */
const typesText = (types: string[]) => (types.includes('*') ? 'all events' : types.join(', '));
const NO_TYPES = 'Choose at least one event type, or "All events".';

/** The event types an endpoint receives: "All events" (`*`) or some of them; `error` is shown under the group. */
function TypesPicker({ all, value, onChange, idPrefix, error }: { all: string[]; value: string[]; onChange: (v: string[]) => void; idPrefix: string; error?: string }) {
  const every = value.includes('*');
  return (
    <>
      <fieldset class="row types" aria-invalid={error ? 'true' : undefined} aria-describedby={error ? `${idPrefix}-err` : undefined}>
        <legend>Event types</legend>
        <label class="inline" for={`${idPrefix}-all`}>
          <input id={`${idPrefix}-all`} type="checkbox" checked={every} onChange={(e) => onChange(e.currentTarget.checked ? ['*'] : [])} />
          All events
        </label>
        {all.map((t, i) => (
          <label key={t} class="inline" for={`${idPrefix}-${i}`}>
            <input id={`${idPrefix}-${i}`} type="checkbox" disabled={every} checked={every || value.includes(t)} onChange={(e) => onChange(e.currentTarget.checked ? [...value, t] : value.filter((x) => x !== t))} />
            {t}
          </label>
        ))}
      </fieldset>
      {error && <span id={`${idPrefix}-err`} class="field-error" role="alert">{error}</span>}
    </>
  );
}

export default function WebhooksScreen({ route }: { route: string[] }) {
  const list = useAsync(() => run(Endpoints), []);
  const { error, act } = useAction();
  const [secret, setSecret] = useState<string | null>(null);
  const [form, setForm] = useState({ url: '', description: '', types: [] as string[] });
  const [noTypes, setNoTypes] = useState(false);
  // Only types endpoints may receive (not the deliveries' own events, which the server refuses in event_types).
  const all = (list.data?.eventTypes ?? []).filter((t) => t.outbound && t.name !== 'ping').map((t) => t.name);
  const errs = fieldErrors(error);
  const current = list.data?.webhookEndpoints.items.find((e) => e.id === route[0]);
  if (current) return <EndpointDetail endpoint={current} all={all} reload={list.reload} />;
  return (
    <>
      <h1>Webhooks</h1>
      <p class="muted">Endpoints your tenant's events are sent to, signed with each endpoint's secret (Standard Webhooks).</p>
      {secret && (
        <Notice>
          Signing secret, shown this once: copy it now. <code data-testid="new-secret">{secret}</code>{' '}
          <button type="button" onClick={() => setSecret(null)}>I have copied it</button>
        </Notice>
      )}
      <ErrorBox error={error ?? list.error} />
      <Loading when={list.loading} />
      {!!list.data?.webhookEndpoints.items.length && <table data-testid="endpoints">
        <caption class="sr-only">Endpoints</caption>
        <thead><tr><th scope="col">URL</th><th scope="col">Event types</th><th scope="col">State</th></tr></thead>
        <tbody>
          {(list.data?.webhookEndpoints.items ?? []).map((e) => (
            <tr key={e.id}>
              <td><a href={`#/webhooks/${e.id}`}>{e.url}</a><br /><small class="muted">{e.description}</small></td>
              <td>{typesText(e.event_types)}</td>
              <td>{e.enabled ? 'enabled' : `disabled${e.disabled_reason ? `: ${e.disabled_reason}` : ''}`}</td>
            </tr>
          ))}
        </tbody>
      </table>}
      {list.data && !list.data.webhookEndpoints.items.length && <Empty>No endpoints yet. Add the URL that should receive your events with the form below.</Empty>}
      <form class="filters" aria-label="New endpoint" onSubmit={(ev) => {
        ev.preventDefault();
        setNoTypes(!form.types.length);
        if (!form.types.length) return;
        void act(async () => {
          const r = await run(CreateEndpoint, { url: form.url, event_types: form.types, description: form.description || null });
          setSecret(r.createWebhookEndpoint.secret);
          setForm({ url: '', description: '', types: [] });
          toast(`Endpoint ${form.url} created`);
        }, list.reload);
      }}>
        <h2>New endpoint</h2>
        <div class="row">
          <label for="ep-url">URL</label>
          <input id="ep-url" type="url" required value={form.url} aria-invalid={errs.url ? 'true' : undefined} aria-describedby={errs.url ? 'ep-url-err' : undefined} onInput={(e) => setForm({ ...form, url: e.currentTarget.value })} />
          {errs.url && <span id="ep-url-err" class="field-error">{errs.url}</span>}
        </div>
        <div class="row"><label for="ep-desc">Description</label><input id="ep-desc" value={form.description} onInput={(e) => setForm({ ...form, description: e.currentTarget.value })} /></div>
        <TypesPicker all={all} value={form.types} onChange={(types) => { setNoTypes(false); setForm({ ...form, types }); }} idPrefix="ep-new-type" error={noTypes ? NO_TYPES : errs.event_types} />
        <button type="submit">Create endpoint</button>
      </form>
    </>
  );
}

function EndpointDetail({ endpoint: e, all, reload }: { endpoint: Endpoint; all: string[]; reload: () => void }) {
  const { error, act } = useAction();
  const [types, setTypes] = useState(e.event_types);
  const [noTypes, setNoTypes] = useState(false);
  const [secret, setSecret] = useState<string | null>(null);
  const [status, setStatus] = useState('');
  const [deleting, setDeleting] = useState(false);
  const deliveries = useAsync(() => run(Deliveries, { id: e.id, status: status || null }).then((r) => r.webhookDeliveries), [e.id, status]);
  // A new event of a type this endpoint listens to makes a delivery: show it without polling.
  useLive(AnyEvent, { types: e.event_types.some((t) => t.includes('*')) ? null : e.event_types }, () => deliveries.reload(), [e.id, e.event_types.join()]);
  // Each recorded attempt (the sender's, or a retry from another session) changes a delivery's status and attempts.
  useLive(DeliveryChanged, {}, (d) => (d.events.data as { endpoint_id?: string }).endpoint_id === e.id && deliveries.reload(), [e.id]);
  return (
    <>
      <Crumbs items={[['Webhooks', '/webhooks'], [e.url, null]]} />
      <h1>Endpoint {e.url}</h1>
      <p>{e.enabled ? 'Enabled' : `Disabled${e.disabled_reason ? `: ${e.disabled_reason}` : ''}`} · receives {typesText(e.event_types)} · created <Time v={e.created_at} />{e.secret_rotated_at && <> · secret rotated <Time v={e.secret_rotated_at} /></>}</p>
      {secret && (
        <Notice>
          New signing secret, shown this once: <code data-testid="new-secret">{secret}</code>{' '}
          <button type="button" onClick={() => setSecret(null)}>I have copied it</button>
        </Notice>
      )}
      <ErrorBox error={error} />
      <div class="actions">
        <button type="button" onClick={() => act(() => run(UpdateEndpoint, { id: e.id, enabled: !e.enabled }), reload, () => toast(e.enabled ? 'Endpoint disabled' : 'Endpoint enabled'))}>{e.enabled ? 'Disable' : 'Enable'}</button>
        <button type="button" onClick={() => act(async () => setSecret((await run(RotateSecret, { id: e.id })).rotateWebhookEndpointSecret.secret), reload)}>Rotate secret</button>
        <button type="button" onClick={() => act(() => run(TestEndpoint, { id: e.id }), deliveries.reload, () => toast('Test event sent'))}>Send test</button>
        <button type="button" onClick={() => setDeleting(true)}>Delete…</button>
      </div>
      {deleting && (
        <ConfirmDialog title={`Delete ${e.url}?`} confirmLabel="Delete endpoint" onClose={() => setDeleting(false)} onConfirm={async () => { await run(DeleteEndpoint, { id: e.id }); reload(); location.hash = '#/webhooks'; }}>
          The endpoint and its deliveries are deleted; no more events are sent to it.
        </ConfirmDialog>
      )}
      <form class="filters" aria-label="Event types of this endpoint" onSubmit={(ev) => {
        ev.preventDefault();
        setNoTypes(!types.length);
        if (types.length) void act(() => run(UpdateEndpoint, { id: e.id, event_types: types }), reload, () => toast(`Event types saved: ${typesText(types)}`));
      }}>
        <TypesPicker all={all} value={types} onChange={(v) => { setNoTypes(false); setTypes(v); }} idPrefix="ep-type" error={noTypes ? NO_TYPES : undefined} />
        <button type="submit">Save event types</button>
      </form>
      <LazyPagePlot kind="endpoint" id={e.id} needs="webhookEndpointSeries" title="Activity" />
      <h2>Deliveries</h2>
      <div class="filters">
        <div class="row">
          <label for="dl-status">Status</label>
          <select id="dl-status" value={status} onChange={(ev) => setStatus(ev.currentTarget.value)}>
            <option value="">(any)</option>
            {['pending', 'delivered', 'failed'].map((s) => <option key={s}>{s}</option>)}
          </select>
        </div>
      </div>
      <Loading when={deliveries.loading} />
      <ErrorBox error={deliveries.error} />
      <div class="scroll">
        <table data-testid="deliveries">
          <caption class="sr-only">Deliveries</caption>
          <thead><tr><th scope="col">Event</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Every attempt</th><th scope="col">Actions</th></tr></thead>
          <tbody>
            {(deliveries.data?.items ?? []).map((d) => (
              <tr key={d.id} data-status={d.status}>
                <td>{d.event_type}<br /><small class="muted"><Time v={d.created_at} /></small></td>
                <td><span class={`pill ${d.status === 'delivered' ? 'ok' : d.status === 'failed' ? 'bad' : ''}`}>{d.status}</span>{d.next_attempt_at && <><br /><small class="muted">next <Time v={d.next_attempt_at} /></small></>}</td>
                <td>{d.attempts}</td>
                <td>
                  {d.attempt_log.length ? (
                    <ol class="attempts" data-testid="attempt-log" aria-label={`Attempts of delivery ${d.id}`}>
                      {d.attempt_log.map((a) => (
                        <li key={a.attempted_at}>
                          <small class="muted"><Time v={a.attempted_at} /></small> HTTP {a.status ?? '–'} in {a.duration_ms} ms{a.error ? ` · ${a.error}` : ''}
                          {a.response_excerpt && <><br /><code>{a.response_excerpt.slice(0, 120)}</code></>}
                        </li>
                      ))}
                    </ol>
                  ) : '–'}
                </td>
                <td>{d.status !== 'delivered' && <button type="button" onClick={() => act(() => run(RetryDelivery, { endpoint_id: e.id, delivery_id: d.id }), deliveries.reload, () => toast('Delivery retried'))}>Retry</button>}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </>
  );
}
