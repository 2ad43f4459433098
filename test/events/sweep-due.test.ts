/**
 * A sweep pass runs only when its window is due (docs/events.md, "Finding what a dead writer left"):
 * once one replica has read the window, another replica's tick right after claims nothing and sends
 * no window query, so replicas share one window query per pass and tick instead of one each.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { OutboxSweeper } from '../../plugins/events/sweep.ts';
import type { Relay, RelaySettings } from '../../plugins/events/relay.ts';
import { createLogger } from '../../core/logger.ts';

describe('sweep passes across replicas', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ plugins: [] });
  });
  afterAll(() => t?.close());

  it('a replica ticking right after another reads no window: the pass is not due until a tick later', async () => {
    // Its own database: the app's sweeper shares `event_sweeps` with nobody here.
    const conn = t.app.db.conn.useDb(`sweep_due_${Date.now()}`);
    // A tick of 60 s: the second replica's tick comes well within it, however busy the machine.
    const settings: RelaySettings = { flushMs: 0, maxBatch: 500, sweepMs: 60_000, sweepAgeMs: 5_000, lateSweepAgeMs: 600_000, retentionMs: 7 * 86_400_000 };
    const windows: Record<string, string[]> = { first: [], second: [] };
    const replica = (name: 'first' | 'second') => {
      // The relay's part of a pass (reading the window) is what is counted; the claim is the database's.
      const relay = {
        sweepWindow: (from: Date, until: Date) => {
          windows[name]!.push(`${from.toISOString()}..${until.toISOString()}`);
          return Promise.resolve(0);
        },
        coveredBefore: () => undefined,
      };
      return new OutboxSweeper(conn, relay as unknown as Relay, settings, createLogger('silent'));
    };
    const [first, second] = [replica('first'), replica('second')];
    await first.tick();
    // The first tick of each replica runs both passes: recent (from the retention floor) and late.
    expect(windows.first).toHaveLength(2);
    await second.tick();
    expect(windows.second).toEqual([]);
    const states = await conn.collection('event_sweeps').find().toArray();
    expect(states.map((s) => s._id).sort()).toEqual(['late', 'recent']);
    for (const s of states) expect(s.lease_until.getTime()).toBe(0);
    await conn.dropDatabase();
  });
});
