/**
 * Across replicas without Redis: an event written through one server process reaches subscribers
 * on another (SSE and graphql-ws), through the shared event log. And in one process, the tail's
 * database queries do not grow with the number of subscribers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, uniqueDbUri, type TestApp } from '../helpers/app.ts';
import { startReplicas, type ServerProcess } from '../helpers/processes.ts';
import { eventWriterPlugin } from '../fixtures/event-writer-plugin.ts';
import { eventStream, sleep, subscribe, until, wsClient, type SseStream } from './helpers.ts';

describe('two server processes on one database', () => {
  let procs: ServerProcess[] = [];
  beforeAll(async () => {
    procs = await startReplicas(2, { MONGODB_URI: uniqueDbUri(), PLUGINS: './test/fixtures/event-writer-plugin.ts', EVENTS_POLL_INTERVAL_MS: '100', RATE_LIMIT_ENABLED: 'false' });
  }, 90_000);
  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop()));
  });

  it('an event written through A reaches SSE and graphql-ws subscribers on B, once each', async () => {
    const [a, b] = procs as [ServerProcess, ServerProcess];
    const sse = await eventStream(b.url, { query: 'types=ew_note.created' });
    const ws = wsClient(b.url, { apiKey: ADMIN_KEY });
    const sub = subscribe(ws, 'subscription { events(types: ["ew_note.created"]) { id data } }');
    await sleep(500);
    const written = await fetch(`${a.url}/ew-notes`, { method: 'POST', headers: { 'X-API-Key': ADMIN_KEY, 'Content-Type': 'application/json', 'X-Tenant-Id': '5f0000000000000000000001' }, body: JSON.stringify({ title: 'from A' }) });
    expect(written.status).toBe(201);
    const started = Date.now();
    await until(() => sse.events.length === 1 && sub.results.length === 1, 30_000, 'delivery on B');
    // Live delivery by B's tail (polling every 100 ms), with room for a busy machine: 100 polls.
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(JSON.parse(sse.events[0]!.data).data.title).toBe('from A');
    expect(sub.values('events')[0].id).toBe(sse.events[0]!.id);
    await sleep(500);
    expect(sse.events).toHaveLength(1);
    expect(sub.results).toHaveLength(1);
    sse.close();
    await ws.dispose();
  }, 30_000);
});

describe('one tail per process', () => {
  let t: TestApp;
  const streams: SseStream[] = [];
  beforeAll(async () => {
    t = await buildTestApp({ plugins: [eventWriterPlugin], config: { EVENTS_POLL_INTERVAL_MS: '50', RATE_LIMIT_ENABLED: 'false' } });
  });
  afterAll(async () => {
    for (const s of streams) s.close();
    await t?.close();
  });

  /** The tail's polls per second and queries per poll over `ms` while notes are written. */
  const rate = async (ms: number) => {
    const realtime = t.app.services.get('realtime');
    const before = realtime.stats();
    const end = Date.now() + ms;
    while (Date.now() < end) {
      await t.http('POST', '/ew-notes', { json: { title: 'x' }, headers: { 'X-Tenant-Id': '5f0000000000000000000001' } });
      await sleep(50);
    }
    const after = realtime.stats();
    const polls = after.tail_polls - before.tail_polls;
    return { pollsPerSecond: (polls * 1000) / ms, queriesPerPoll: (after.tail_queries - before.tail_queries) / polls };
  };

  it('the same database queries with 1 and with 40 subscribers (one poll every interval, at most 2 queries each), every one of them served', async () => {
    streams.push(await eventStream(t.url, { query: 'types=ew_note.created' }));
    await sleep(300);
    const one = await rate(1500);
    for (let i = 0; i < 39; i++) streams.push(await eventStream(t.url, { query: 'types=ew_note.created' }));
    await sleep(300);
    expect(t.app.services.get('realtime').stats().listeners).toBe(40);
    const forty = await rate(1500);
    // At most 1000/50 = 20 polls a second (ids, then the new events); no term per subscriber.
    for (const r of [one, forty]) {
      expect(r.pollsPerSecond).toBeLessThanOrEqual(21);
      expect(r.queriesPerPoll).toBeLessThanOrEqual(2);
    }
    const written = await t.app.db.conn.collection('events').countDocuments({ type: 'ew_note.created' });
    // Every event reached the first subscriber; every later one got the same events as the others.
    await until(() => streams[0]!.events.length === written, 10_000, 'every event');
    await until(() => streams.slice(1).every((s) => s.events.length === streams[1]!.events.length), 10_000, 'the same events');
    expect(streams[1]!.events.length).toBeGreaterThan(5);
  });
});
