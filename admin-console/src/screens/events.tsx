/** The event log: newest first, filtered by type, live through the `events` subscription; each event's JSON. */
import { useState } from 'preact/hooks';
import { run } from '../api.ts';
import { graphql, type ResultOf } from '../graphql.ts';
import { useLive } from '../live.ts';
import { Drawer, Empty, ErrorBox, fmtDate, Json, Loading, ShortId, Time, useAsync } from '../ui.tsx';

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
      <div class="scroll">
        <table data-testid="event-list" class="list">
          <caption class="sr-only">Events</caption>
          <thead><tr><th scope="col">Type</th><th scope="col">When</th><th scope="col">Actor</th><th scope="col">Id</th></tr></thead>
          <tbody>
            {items.map((e) => (
              <tr key={e.id} class={e.id === selected ? 'chosen' : undefined}>
                <td><button type="button" class="link" onClick={() => setSelected(e.id)}>{e.type}</button></td>
                <td class="nowrap"><Time v={e.created_at} /></td>
                <td class="nowrap">{e.actor ? <ShortId id={e.actor} label="actor id" /> : 'system'}</td>
                <td class="nowrap"><ShortId id={e.id} label="event id" /></td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {next && <button type="button" onClick={() => void more()}>Older events</button>}
      {!items.length && !page.loading && <Empty>No events{type ? ` of type ${type}` : ''} yet. They appear here as soon as something happens (a document saved, a delivery sent).</Empty>}
      {chosen && (
        <Drawer title={`Event ${chosen.type}`} onClose={() => setSelected(null)} testId="event-detail">
          <dl class="detail">
            <div><dt>Id</dt><dd><code>{chosen.id}</code></dd></div>
            <div><dt>When</dt><dd><Time v={chosen.created_at} /> <small class="muted">{fmtDate(chosen.created_at)}</small></dd></div>
            <div><dt>Actor</dt><dd>{chosen.actor ?? 'system'}</dd></div>
            <div><dt>Request</dt><dd>{chosen.request_id ?? '–'}</dd></div>
          </dl>
          <Json value={chosen} label={`Event ${chosen.id} as JSON`} />
        </Drawer>
      )}
    </>
  );
}
