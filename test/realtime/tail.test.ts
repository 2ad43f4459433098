/**
 * The event log's tail (plugins/events/realtime/tail.ts), which feeds every realtime subscriber of a process,
 * under a burst: more events of one commit time than one page holds.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { EventTail } from '../../plugins/events/realtime/tail.ts';
import { eventModel } from '../../plugins/events/model.ts';
import { waitFor } from '../helpers/wait.ts';

describe('event tail', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({});
  });
  afterAll(() => t?.close());

  it('hands out every event when more of them share one commit time than a page holds (relay batches, several processes in one millisecond)', async () => {
    // Pages of 5: 30 events of one commit time are six pages.
    const tail = new EventTail(eventModel(t.app.db.conn), { pollMs: 20, lookbackMs: 2000, batch: 5 }, t.app.log);
    const got: string[] = [];
    const stop = await tail.listen((events) => got.push(...events.map((e) => e.id)));
    try {
      const committed_at = new Date();
      const ids = Array.from({ length: 30 }, (_, i) => `evt_tail_${String(i).padStart(3, '0')}`);
      await t.app.db.conn.collection('events').insertMany(ids.map((_id) => ({ _id, type: 'tail.test', tenant_id: null, created_at: committed_at, committed_at, data: {}, actor: null, request_id: null, previous: null, meta: null, source: null })) as never[]);
      await waitFor(() => got.length >= 30, 'all 30 events handed out', 10_000);
      await new Promise((r) => setTimeout(r, 200));
      expect([...got].sort()).toEqual(ids);
    } finally {
      stop();
      await tail.close();
    }
  });
});
