/**
 * graphql-ws `next` frames written by a shared group itself (plugins/events/realtime/yoga.ts, FrameSink):
 * one execution and one serialization per event per group, the frame exactly graphql-ws's own
 * message; each member still filters every event with its own current rights; a member whose
 * socket stops reading falls REALTIME_MAX_QUEUE behind and ends alone (503), then completes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { z } from 'zod';
import { ADMIN_KEY, buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { definePlugin } from '../../core/plugin.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { resourceEventsPlugin } from '../fixtures/resource-events-plugin.ts';
import { sseChunk } from '../../plugins/events/realtime/routes.ts';
import type { EventRecord } from '../../plugins/events/public/contributions.ts';
import { EVENTS_SUBSCRIPTION, eventStream, sleep, until, wsTracker } from './helpers.ts';

const blobPlugin = definePlugin({
  name: 'blob-events',
  setup: () => ({ eventTypes: [{ name: 'test.blob', description: 'A test event', data: z.object({ n: z.number(), pad: z.string() }) }] }),
});

let t: TestApp;
const ws = wsTracker(() => t.url);
const { client, sub } = ws;
const raws: WebSocket[] = [];
const EVENTS = EVENTS_SUBSCRIPTION;
const BLOBS = { types: ['test.blob'] };
const stats = () => t.app.services.get('realtime').stats();
const TENANT = '5f0000000000000000000001';
const blob = (n: number, size = 10) => t.app.services.get('events').append('test.blob', { actor: null, tenant_id: TENANT, data: { n, pad: 'x'.repeat(size) } });

/** A graphql-transport-ws client on the raw socket: every text frame it receives, as sent. */
async function rawSubscriber(query: string, variables: Record<string, unknown>) {
  const socket = new WebSocket(t.url.replace(/^http/, 'ws') + '/graphql', 'graphql-transport-ws');
  raws.push(socket);
  const frames: string[] = [];
  socket.on('message', (data) => frames.push(String(data)));
  await new Promise((resolve) => socket.once('open', resolve));
  socket.send(JSON.stringify({ type: 'connection_init', payload: { apiKey: ADMIN_KEY } }));
  await until(() => frames.some((f) => JSON.parse(f).type === 'connection_ack'), 5000, 'connection_ack');
  socket.send(JSON.stringify({ id: 'raw-1', type: 'subscribe', payload: { query, variables } }));
  return { socket, frames, messages: () => frames.map((f) => JSON.parse(f)).filter((m) => m.id === 'raw-1') };
}

beforeAll(async () => {
  t = await buildTestApp({
    plugins: [resourcesPlugin, resourceEventsPlugin, blobPlugin],
    config: { SAMPLE_RESOURCES_ENABLED: 'false', EVENTS_POLL_INTERVAL_MS: '50', AUTH_CACHE_TTL_MS: '200', REALTIME_MAX_QUEUE: '30' },
  });
});
afterAll(async () => {
  for (const r of raws) r.terminate();
  await ws.disposeAll();
  await t?.close();
});

describe('graphql-ws frames written by the group', () => {
  it("one execution and one serialization per event per group, one frame per member; the frame is graphql-ws's own `next` message", async () => {
    const members = [1, 2, 3, 4, 5].map(() => sub(client({ apiKey: ADMIN_KEY }), EVENTS, BLOBS));
    const raw = await rawSubscriber(EVENTS, BLOBS);
    await until(() => stats().listeners >= 6, 10_000, 'every subscriber listening');
    await sleep(200);
    const before = stats();
    for (const n of [1, 2, 3]) await blob(n);
    await until(() => members.every((s) => s.results.length === 3) && raw.messages().length === 3, 15_000, 'deliveries');
    await sleep(200);
    const after = stats();
    expect(after.executions - before.executions).toBe(3);
    expect(after.serialized - before.serialized).toBe(3);
    expect(after.frames - before.frames).toBe(6 * 3);
    for (const s of members) expect(s.values('events').map((e) => e.data.n)).toEqual([1, 2, 3]);
    const texts = raw.frames.filter((f) => JSON.parse(f).id === 'raw-1');
    for (const [i, text] of texts.entries()) {
      const m = JSON.parse(text);
      // Byte for byte what graphql-ws's stringifyMessage makes of the message (key order included).
      expect(text).toBe(JSON.stringify({ id: 'raw-1', type: 'next', payload: m.payload }));
      expect(m.payload).toEqual({ data: { events: members[0]!.results[i].data.events } });
    }
    raw.socket.send(JSON.stringify({ id: 'raw-1', type: 'complete' }));
    for (const s of members) s.dispose();
    await until(() => stats().listeners === 0, 5000, 'every member gone');
  });

  it('a member that may no longer see an event does not get it, while its group does; rights restored, it gets the next one', async () => {
    const u1 = await createTenantUser(t, { features: ['memos'] });
    const u2 = await createTenantUser(t, { tenantId: u1.tenantId, features: ['memos'] });
    const vars = { types: ['memos.created'] };
    const keeps = [1, 2].map(() => sub(client({ apiKey: u1.key }), EVENTS, vars));
    const loses = sub(client({ apiKey: u2.key }), EVENTS, vars);
    await until(() => stats().listeners >= 3, 10_000, 'every subscriber listening');
    await sleep(200);
    const groups = stats().groups;
    const before = stats();
    const memo = async (title: string) => expect((await t.http('POST', '/memos', { key: u1.key, json: { title } })).status).toBe(201);
    await memo('m1');
    await until(() => loses.results.length === 1 && keeps.every((s) => s.results.length === 1), 15_000, 'first deliveries');
    // u2 loses the feature: its session's rights are re-checked, it stays in its group (one key at subscribe time).
    expect((await t.http('PATCH', `/admin/users/${u2.userId}`, { json: { features: [] } })).status).toBe(200);
    await sleep(800);
    await memo('m2');
    await until(() => keeps.every((s) => s.results.length === 2), 15_000, 'the group receiving m2');
    expect((await t.http('PATCH', `/admin/users/${u2.userId}`, { json: { features: ['memos'] } })).status).toBe(200);
    await sleep(800);
    await memo('m3');
    await until(() => loses.results.length === 2 && keeps.every((s) => s.results.length === 3), 15_000, 'm3 to everyone');
    await sleep(200);
    for (const s of keeps) expect(s.values('events').map((e) => e.data.title)).toEqual(['m1', 'm2', 'm3']);
    expect(loses.values('events').map((e) => e.data.title)).toEqual(['m1', 'm3']);
    expect(loses.done).toBe(false);
    expect(stats().groups).toBe(groups);
    expect(stats().executions - before.executions).toBe(3);
    for (const s of [...keeps, loses]) s.dispose();
  });

  it('a member that stops reading falls REALTIME_MAX_QUEUE behind and ends alone (SERVICE_UNAVAILABLE, then complete); the rest of its group gets every event', async () => {
    const fast = sub(client({ apiKey: ADMIN_KEY }), EVENTS, BLOBS);
    const slow = await rawSubscriber(EVENTS, BLOBS);
    await until(() => stats().listeners >= 2, 10_000, 'both listening');
    await sleep(200);
    const paused = (slow.socket as unknown as { _socket: { pause(): void; resume(): void } })._socket;
    paused.pause();
    // 30 MB: more than the socket buffers hold (a few MB), so the server's writes wait and the queue fills.
    const total = 120;
    // The member that reads keeps within 10 of the writes (it reads in this busy process too, and
    // would otherwise fall REALTIME_MAX_QUEUE behind itself); the paused one falls further each write.
    for (let n = 1; n <= total; n++) {
      await blob(n, 256 * 1024);
      await until(() => fast.done || fast.results.length >= n - 10, 30_000, `the reading member within 10 of event ${n}`);
      expect(fast.done, 'the member that reads is not ended').toBe(false);
    }
    await until(() => fast.results.length === total, 60_000, 'every event to the member that reads');
    expect(fast.values('events').map((e) => e.data.n)).toEqual(Array.from({ length: total }, (_, i) => i + 1));
    expect(fast.done).toBe(false);
    paused.resume();
    await until(() => slow.messages().some((m) => m.type === 'complete'), 30_000, 'the slow member completing');
    const got = slow.messages();
    const events = got.filter((m) => m.type === 'next' && m.payload.data).map((m) => m.payload.data.events.data.n);
    // What it got is a prefix of the events, then the error, then completion.
    expect(events.length).toBeGreaterThan(0);
    expect(events.length).toBeLessThan(total);
    expect(events).toEqual(Array.from({ length: events.length }, (_, i) => i + 1));
    const tail = got.slice(events.length);
    expect(tail.map((m) => m.type)).toEqual(['next', 'complete']);
    expect(tail[0].payload.errors[0].extensions.code).toBe('SERVICE_UNAVAILABLE');
    await blob(total + 1);
    await until(() => fast.results.length === total + 1, 15_000, 'the group still delivering');
    fast.dispose();
  }, 90_000);

  it('SSE: a batch is formatted and encoded once for every stream that drains the very same events; streams of one view get the same bytes', async () => {
    const rec = (n: number): EventRecord => ({ id: `evt_${String(n).padStart(24, '0')}`, type: 'test.blob', tenant_id: TENANT, created_at: new Date(0).toISOString(), data: { n }, actor: null, request_id: null }) as unknown as EventRecord;
    const [a, b, c] = [rec(1), rec(2), rec(3)];
    const chunk = sseChunk([a!, b!, c!]);
    expect(sseChunk([a!, b!, c!])).toBe(chunk);
    expect(chunk.toString()).toBe([a, b, c].map((e) => `id: ${e!.id}\nevent: test.blob\ndata: ${JSON.stringify(e)}\n\n`).join(''));
    // Another view of the same first event (a filter that drops b) is another chunk; so is a copy of an event.
    expect(sseChunk([a!, c!])).not.toBe(chunk);
    expect(sseChunk([a!, c!]).toString()).toBe(chunk.toString().replace(/id: evt_0+2[^]*?\n\n/, ''));
    expect(sseChunk([a!, b!, { ...c! }])).not.toBe(chunk);

    const streams = await Promise.all([1, 2, 3].map(() => eventStream(t.url, { query: 'types=test.blob' })));
    await until(() => stats().listeners >= 3, 10_000, 'streams listening');
    for (const n of [1, 2, 3, 4]) await blob(n);
    await until(() => streams.every((s) => s.events.length === 4), 15_000, 'deliveries');
    for (const s of streams) expect(s.data('test.blob').map((e) => e.data.n)).toEqual([1, 2, 3, 4]);
    for (const s of streams) s.close();
  });
});
