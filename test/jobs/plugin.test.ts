/**
 * The plugin as a whole: off unless JOBS_ENABLED (no routes, no service, no built-in jobs), and
 * its GraphQL fragment as printed (snapshot).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { printType, type GraphQLObjectType } from 'graphql';
import { buildTestApp, expectError, type TestApp } from '../helpers/app.ts';
import { jobsPlugin } from '../../plugins/jobs/index.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { jobsApp } from './helpers.ts';

describe('JOBS_ENABLED false (the default)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ plugins: [auditPlugin, jobsPlugin] });
  });
  afterAll(() => t?.close());

  it('offers no route, no GraphQL field, no service and no built-in job', async () => {
    for (const [m, p] of [
      ['GET', '/jobs/registry'], ['GET', '/jobs/registry/cleanup_job_runs'], ['GET', '/jobs/runs'], ['GET', '/jobs/schedules'], ['GET', '/jobs/chains'],
      ['POST', '/jobs/run/cleanup_job_runs'], ['POST', '/jobs/run'], ['POST', '/jobs/check-schedules'],
    ] as const)
      expectError(await t.http(m, p, m === 'POST' ? { json: {} } : {}), 404, 'NOT_FOUND');
    expect(t.app.services.maybe('jobs')).toBeUndefined();
    const names = t.app.kernel.jobs().map((j) => j.name);
    // None of the jobs plugin's own built-ins is offered to any engine; other plugins' jobs stay declared.
    for (const builtin of ['cleanup_expired_tokens', 'cleanup_job_runs', 'calculate_next_schedules']) expect(names).not.toContain(builtin);
    expect(names).toContain('cleanup_audit_log');
    expect(t.app.schema.getQueryType()!.getFields().jobRuns).toBeUndefined();
    expect(t.app.schema.getMutationType()?.getFields().triggerJob).toBeUndefined();
    expect(await t.app.db.conn.db!.listCollections({ name: 'agenda_jobs' }).toArray()).toEqual([]);
  });
});

describe('GraphQL fragment', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await jobsApp();
  });
  afterAll(() => t?.close());

  it('prints as recorded', () => {
    const s = t.app.schema;
    for (const name of ['JobRegistryEntry', 'JobRun', 'JobRunPage', 'JobLogLine', 'JobSchedule', 'JobChain', 'JobChainStep']) expect(printType(s.getType(name)!)).toMatchSnapshot(name);
    const pick = (type: GraphQLObjectType, prefix: RegExp) =>
      Object.values(type.getFields()).filter((f) => prefix.test(f.name)).map((f) => `${f.name}(${f.args.map((a) => `${a.name}: ${String(a.type)}`).join(', ')}): ${String(f.type)}`);
    expect(pick(s.getQueryType()!, /^job/)).toMatchSnapshot('queries');
    expect(pick(s.getMutationType()!, /Job/)).toMatchSnapshot('mutations');
  });
});
