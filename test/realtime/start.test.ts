/**
 * Where a fresh `GET /events/stream` starts: every event committed after its `200` reaches it.
 * 200 streams, 20 opened at a time while other clients keep writing, each followed by a write made
 * as soon as its 200 arrived: every stream gets the event of its own write. No deadline is
 * asserted; the waits only bound a hung run.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { eventWriterPlugin } from '../fixtures/event-writer-plugin.ts';
import { eventStream, sleep, until, type SseStream } from './helpers.ts';

let t: TestApp;
let admin: Awaited<ReturnType<typeof createTenantUser>>;
const open: SseStream[] = [];

beforeAll(async () => {
  t = await buildTestApp({ plugins: [eventWriterPlugin], config: { EVENTS_POLL_INTERVAL_MS: '50', EVENTS_RELAY_INTERVAL_MS: '0', RATE_LIMIT_ENABLED: 'false' } });
  admin = await createTenantUser(t, { roles: ['admin'] });
});
afterAll(async () => {
  for (const s of open) s.close();
  await t?.close();
});

const note = (title: string) => t.http('POST', '/ew-notes', { key: admin.key, json: { title } });

describe('a fresh stream starts at its 200', () => {
  it('200 streams, 20 at a time under concurrent writes: each gets the event of the write made right after its 200', async () => {
    const BATCHES = 10;
    const PER_BATCH = 20;
    let load = true;
    // Other clients write all along, so streams join while the tail polls, pushes and pauses.
    const writers = Array.from({ length: 3 }, async (_, w) => {
      for (let i = 0; load; i++) expect((await note(`load ${w}.${i}`)).status).toBe(201);
    });
    // A stream open all along: the tail always has a listener, so a new stream joins beside it.
    const busy = await eventStream(t.url, { key: admin.key, query: 'types=ew_note.updated' });
    open.push(busy);
    expect(busy.status).toBe(200);
    const missed: string[] = [];
    try {
      for (let b = 0; b < BATCHES; b++) {
        await Promise.all(
          Array.from({ length: PER_BATCH }, async (_, i) => {
            // Staggered (not timed): some streams of the batch listen while others still join.
            await sleep(i * 5);
            const s = await eventStream(t.url, { key: admin.key, query: 'types=ew_note.created' });
            open.push(s);
            expect(s.status).toBe(200);
            const r = await note(`start ${b}.${i}`);
            expect(r.status).toBe(201);
            const got = await until(() => s.data().some((e) => e.data.id === r.body.id), 60_000, `the event of write ${b}.${i}`).catch(() => false);
            if (!got) missed.push(`${b}.${i}`);
            s.close();
          }),
        );
      }
    } finally {
      load = false;
      await Promise.all(writers);
    }
    expect(missed).toEqual([]);
  }, 600_000);
});
