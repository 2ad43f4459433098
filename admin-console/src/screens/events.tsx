/** The event log: newest first, filtered by type, live through the `events` subscription; each event's JSON. */
import { useState } from 'preact/hooks';
import { run } from '../api.ts';
import { graphql, type ResultOf } from '../graphql.ts';
import { useLive } from '../live.ts';
import { ErrorBox, fmtDate, Json, Loading, useAsync } from '../ui.tsx';

const EventTypes = graphql(`query EventTypes { eventTypes { name plugin description } }`);
const Events = graphql(`
  query Events($type: String, $cursor: String, $limit: Int) {
    events(type: $type, cursor: $cursor, limit: $limit) { items { id type tenant_id created_at actor request_id data } cursors { next } }
  }
`);
const LiveEvents = graphql(`subscription LiveEvents($types: [String!]) { events(types: $types) { id type tenant_id created_at actor request_id data } }`);
type Ev = ResultOf<typeof Events>['events']['items'][number];

export default function EventsScreen({ route }: { route: string[] }) {
  const [type, setType] = useState('');
  const [live, setLive] = useState<Ev[]>([]);
  const [older, setOlder] = useState<Ev[]>([]);
  const [selected, setSelected] = useState<string | null>(route[0] ?? null);
  const types = useAsync(() => run(EventTypes).then((r) => r.eventTypes), []);
  const page = useAsync(() => {
    setLive([]);
    setOlder([]);
    return run(Events, { type: type || null, limit: 25 }).then((r) => r.events);
  }, [type]);
  const [cursor, setCursor] = useState<string | null>(null);
  useLive(LiveEvents, { types: type ? [type] : null }, (d) => setLive((l) => [d.events, ...l].slice(0, 200)), [type]);
  const items = [...live, ...(page.data?.items ?? []), ...older].filter((e, i, all) => all.findIndex((x) => x.id === e.id) === i);
  const next = cursor ?? page.data?.cursors.next ?? null;
  const more = async () => {
    if (!next) return;
    const r = await run(Events, { type: type || null, cursor: next, limit: 25 });
    setOlder((o) => [...o, ...r.events.items]);
    setCursor(r.events.cursors.next ?? '');
  };
  const chosen = items.find((e) => e.id === selected);
  return (
    <>
      <h1>Events</h1>
      <p class="muted">The event log of your tenant, newest first. New events appear as they happen (live).</p>
      <form class="filters" aria-label="Filter events" onSubmit={(e) => e.preventDefault()}>
        <div class="row">
          <label for="ev-type">Type</label>
          <select id="ev-type" value={type} onChange={(e) => { setType(e.currentTarget.value); setCursor(null); }}>
            <option value="">(every type)</option>
            {(types.data ?? []).map((t) => <option key={t.name} value={t.name}>{t.name}</option>)}
          </select>
        </div>
      </form>
      <Loading when={page.loading} />
      <ErrorBox error={page.error ?? types.error} />
      <div class="cols">
        <div class="scroll">
          <table data-testid="event-list">
            <caption class="sr-only">Events</caption>
            <thead><tr><th scope="col">Time</th><th scope="col">Type</th><th scope="col">Id</th></tr></thead>
            <tbody>
              {items.map((e) => (
                <tr key={e.id} class={e.id === selected ? "chosen" : undefined}>
                  <td>{fmtDate(e.created_at)}</td>
                  <td><button type="button" class="link" onClick={() => setSelected(e.id)}>{e.type}</button></td>
                  <td><code>{e.id}</code></td>
                </tr>
              ))}
            </tbody>
          </table>
          {next && <button type="button" onClick={() => void more()}>Older events</button>}
          {!items.length && !page.loading && <p>No events.</p>}
        </div>
        <section aria-labelledby="ev-detail">
          <h2 id="ev-detail">Event detail</h2>
          {chosen ? (
            <>
              <p><strong>{chosen.type}</strong> <code>{chosen.id}</code><br /><small class="muted">actor {chosen.actor ?? 'system'} · request {chosen.request_id ?? '–'}</small></p>
              <Json value={chosen} label={`Event ${chosen.id} as JSON`} />
            </>
          ) : <p class="muted">Choose an event to see its JSON.</p>}
        </section>
      </div>
    </>
  );
}
