/**
 * `GET /jobs/runs/{id}/logs` read with a real streaming client (fetch body reader +
 * eventsource-parser): existing lines first, then new lines and progress as they happen, ending
 * with the run. The stream polls the database, so it works from a process that does not execute
 * the run.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { ADMIN_KEY, buildTestApp, uniqueDbUri, type TestApp } from '../helpers/app.ts';
import { jobsPlugin, type JobsService } from '../../plugins/jobs/index.ts';
import { jobsFixturePlugin } from '../fixtures/jobs-fixture-plugin.ts';
import { FAST, trigger, waitRun } from './helpers.ts';

const uri = uniqueDbUri();
let a: TestApp;
let b: TestApp;
beforeAll(async () => {
  a = await buildTestApp({ plugins: [jobsPlugin, jobsFixturePlugin], config: { ...FAST, MONGODB_URI: uri } });
  b = await buildTestApp({ plugins: [jobsPlugin, jobsFixturePlugin], config: { ...FAST, MONGODB_URI: uri } });
});
afterAll(async () => {
  await b?.close();
  await a?.close();
});

const workerOf = (t: TestApp) => (t.app.services.get('jobs') as unknown as JobsService).dispatcher.worker;

/** Reads the stream as it arrives; resolves with every event once the server ends it. */
async function readStream(t: TestApp, runId: string, onEvent?: (e: EventSourceMessage, at: number) => void) {
  const res = await fetch(`${t.url}/jobs/runs/${runId}/logs`, { headers: { 'X-API-Key': ADMIN_KEY, Accept: 'text/event-stream' } });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const events: (EventSourceMessage & { at: number })[] = [];
  const parser = createParser({
    onEvent: (e) => {
      const at = Date.now();
      events.push({ ...e, at });
      onEvent?.(e, at);
    },
  });
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parser.feed(value);
  }
  return events;
}

describe('run log stream', () => {
  it('sends lines and progress while the run goes on, then ends with the run; works from another process', async () => {
    const r = await trigger(a, 'sleepy', { ms: 3000, steps: 6 });
    await waitRun(a, r.body.id, ['running']);
    // Stream from the app (same database) that does not execute the run.
    const holder = (await a.app.db.conn.collection('job_runs').findOne({ _id: new Types.ObjectId(r.body.id as string) }))!.worker;
    const reader = holder === workerOf(a) ? b : a;
    expect(workerOf(reader)).not.toBe(holder);
    const events = await readStream(reader, r.body.id);
    const final = await waitRun(a, r.body.id);
    const logs = events.filter((e) => e.event === 'log').map((e) => JSON.parse(e.data));
    const progress = events.filter((e) => e.event === 'progress').map((e) => JSON.parse(e.data));
    const end = events.at(-1)!;
    expect(end.event).toBe('end');
    expect(JSON.parse(end.data)).toEqual({ status: 'completed', result: { steps: 6 }, error: null });
    // Every stored line, in order, exactly once.
    expect(logs.map((l) => l.message)).toEqual(final.logs.map((l: { message: string }) => l.message));
    // Each line carries its timestamp: an ISO date, the stored one.
    for (const l of logs) expect(l.timestamp).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(logs.map((l) => l.timestamp)).toEqual(final.logs.map((l: { timestamp: string }) => l.timestamp));
    expect(logs.filter((l) => l.level === 'progress').map((l) => l.percentage)).toEqual([17, 33, 50, 67, 83, 100]);
    // Progress arrived in several events over time, not all at once at the end.
    expect(progress.length).toBeGreaterThanOrEqual(3);
    expect(progress.map((p) => p.progress_current)).toEqual([...progress.map((p) => p.progress_current)].sort((x, y) => x - y));
    const stepLines = events.filter((e) => e.event === 'log' && JSON.parse(e.data).message.startsWith('step '));
    // The first step line reached the client while the run was still going.
    expect(stepLines[0]!.at).toBeLessThan(new Date(final.completed_at).getTime());
    expect(progress[0].status).toBe('running');
  });

  it('a finished run: existing lines first, then end at once', async () => {
    const r = await trigger(a, 'echo', { message: 'old' });
    await waitRun(a, r.body.id);
    const events = await readStream(a, r.body.id);
    expect(events.map((e) => e.event)).toEqual(['log', 'log', 'progress', 'end']);
    expect(JSON.parse(events[0]!.data)).toMatchObject({ level: 'info', message: 'echo old', percentage: null, timestamp: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/) });
  });

  it('an unknown run is 404 in the envelope, not a stream', async () => {
    const res = await a.http('GET', '/jobs/runs/5f0000000000000000000000/logs');
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('NOT_FOUND');
  });
});
