import { expect } from 'vitest';
import { ADMIN_KEY, buildTestApp, type TestApp } from '../helpers/app.ts';
import { jobsPlugin } from '../../plugins/jobs/index.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { jobsFixturePlugin } from '../fixtures/jobs-fixture-plugin.ts';
import { definePlugin, type JobDefinition } from '../../core/plugin.ts';
import { z } from 'zod';
import { scaled } from '../helpers/wait.ts';

/** Short intervals so tests wait little (never asserted as speed). */
export const FAST = { JOBS_ENABLED: 'true', JOBS_POLL_INTERVAL_MS: '100', JOBS_RETRY_DELAY_MS: '100', RATE_LIMIT_ENABLED: 'false' };

/**
 * Jobs of these tests beside the shared fixtures (test/fixtures/jobs-fixture-plugin.ts): `bare`
 * declares nothing but its name and function (the registry applies the defaults); `deaf_timeout`
 * ignores its signal past its 1 s timeout. Both record their calls in `jobs_fixture_calls`.
 */
export const jobsTestPlugin = definePlugin({
  name: 'jobs-test',
  setup({ db }) {
    const jobs = [
      {
        name: 'bare',
        async run(ctx) {
          await db.collection('jobs_fixture_calls').insertOne({ job: 'bare', run_id: ctx.run_id, attempt: ctx.attempt, at: new Date() });
          return { bare: true };
        },
      },
      {
        name: 'deaf_timeout', description: 'Ignores its signal past its 1 s timeout', timeout: 1, max_attempts: 1,
        params: z.object({ ms: z.number().int() }),
        async run(ctx, p) {
          await new Promise((r) => setTimeout(r, p.ms));
          ctx.log('deaf_timeout finished anyway');
          await ctx.progress(1, 1, 'deaf_timeout progress after its timeout');
          await db.collection('jobs_fixture_calls').insertOne({ job: 'deaf_timeout', run_id: ctx.run_id, attempt: ctx.attempt, phase: 'end', at: new Date() });
          return { finished: true };
        },
      } satisfies JobDefinition<z.ZodObject<{ ms: z.ZodNumber }>>,
    ] as JobDefinition[];
    return { jobs };
  },
});

export function jobsApp(config: Record<string, string> = {}): Promise<TestApp> {
  return buildTestApp({ plugins: [resourcesPlugin, auditPlugin, jobsPlugin, jobsFixturePlugin, jobsTestPlugin], config: { ...FAST, ...config } });
}

export type Run = { id: string; status: string; attempt: number; [k: string]: any };

/** Poll a run until its status is one of `statuses`. */
export async function waitRun(t: TestApp | { http: TestApp['http'] }, id: string, statuses: string[] = ['completed', 'failed', 'cancelled'], key: string = ADMIN_KEY, ms = 20_000): Promise<Run> {
  const end = Date.now() + scaled(ms);
  for (;;) {
    const r = await t.http('GET', `/jobs/runs/${id}`, { key });
    expect(r.status).toBe(200);
    if (statuses.includes(r.body.status)) return r.body as Run;
    if (Date.now() > end) throw new Error(`run ${id} still ${r.body.status} (waiting for ${statuses.join('/')})`);
    await new Promise((res) => setTimeout(res, 50));
  }
}

export async function until<T>(fn: () => Promise<T | null | undefined | false>, ms = 20_000, what = 'condition'): Promise<T> {
  const end = Date.now() + scaled(ms);
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((res) => setTimeout(res, 50));
  }
}

export const trigger = (t: TestApp, job: string, parameters: Record<string, unknown> = {}, key = ADMIN_KEY) =>
  t.http('POST', `/jobs/run/${job}`, { key, json: { parameters } });
