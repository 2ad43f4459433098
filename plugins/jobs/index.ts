import { PassThrough } from 'node:stream';
import { z } from 'zod';
import { definePlugin } from '../../core/plugin.ts';
import { defineRoute } from '../../core/http/route.ts';
import { systemActor } from '../../core/context.ts';
import { jobModels } from './model.ts';
import {
  chainBody, chainPatch, chainRunBody, idParams, jobNameParams, listRunsQuery, runBody, runIdParams, runResponse, runsPageResponse,
  scheduleBody, scheduleRunBody, triggerBody, triggerResponse,
} from './schemas.ts';
import { JobsService } from './service.ts';
import { registerJob } from './registry.ts';
import { builtinJobs } from './builtins.ts';
import { jobsGraphql } from './graphql.ts';

export type { JobsService } from './service.ts';

/** Options of the jobs plugin: `jobsPlugin.configure({ ... })`. */
export const jobsOptions = z.object({
  /** Built-in chains, created at start-up when missing, marked `is_system` (never deletable). */
  chains: z.array(chainBody).default([]),
});

/**
 * Background jobs (spec document 3, primary framework and extended model): the registry of every
 * plugin's `jobs`, persisted runs with progress and logs, cron schedules, stored chains, per-tenant
 * fan-out, REST under `/jobs` and GraphQL. Dispatch, cron and cross-replica locking are Agenda's
 * (Mongo backend, on the app's connection). Does nothing unless `JOBS_ENABLED` is true.
 */
export const jobsPlugin = definePlugin({
  name: 'jobs',
  options: jobsOptions,
  async setup({ db, config, options, services, kernel, log }) {
    if (!config.JOBS_ENABLED) return {};
    // Agenda loads only when the plugin is on: servers without jobs do not pay its start-up time.
    const { Engine } = await import('./engine.ts');
    const models = jobModels(db);
    const listTenants = async () => {
      const identity = services.get('identity');
      const ids: string[] = [];
      for (let page = 1; ; page++) {
        const res = await identity.listTenants(systemActor(), { page, per_page: 500 });
        ids.push(...res.items.map((t) => String(t.id)));
        if (ids.length >= res.total || !res.items.length) return ids;
      }
    };
    const svc = new JobsService(
      models,
      {
        multiTenant: config.MULTI_TENANT_ENABLED,
        pollMs: config.JOBS_POLL_INTERVAL_MS,
        retryDelayMs: config.JOBS_RETRY_DELAY_MS,
        defaultTimezone: config.JOBS_DEFAULT_TIMEZONE,
      },
      listTenants,
      log,
    );
    const engine = new Engine(svc, { db: db.db!, lockTtlMs: config.JOBS_LOCK_TTL_SECONDS * 1000, pollMs: config.JOBS_POLL_INTERVAL_MS, concurrency: config.JOBS_CONCURRENCY });
    svc.dispatcher = engine;
    services.provide('jobs', svc);
    const tags = ['jobs'];

    return {
      jobs: builtinJobs(svc, config, services.get('identity')),
      async ready() {
        svc.setJobs(kernel.jobs().map(registerJob));
        // The unique dedupe index must exist before the first run is queued.
        await Promise.all([models.Run.init(), models.Schedule.init(), models.Chain.init()]);
        for (const c of options.chains) await svc.ensureSystemChain(c);
        for (const s of await models.Schedule.find().lean()) await engine.syncSchedule(s as never);
        await engine.start();
      },
      close: () => engine.stop(),
      routes: [
        defineRoute({
          method: 'GET', path: '/jobs/registry', tags, auth: 'admin', summary: 'Registered jobs',
          handler: ({ user }) => svc.registry(user!),
        }),
        defineRoute({
          method: 'GET', path: '/jobs/registry/:job_name', tags, auth: 'admin', summary: 'One registered job', params: jobNameParams, docs: { errors: [404] },
          handler: ({ user, params }) => svc.registryEntry(user!, params.job_name),
        }),
        defineRoute({
          method: 'GET', path: '/jobs/schedules', tags, auth: 'admin', summary: 'List schedules',
          handler: ({ user }) => svc.listSchedules(user!),
        }),
        defineRoute({
          method: 'POST', path: '/jobs/schedules', tags, auth: 'admin', summary: 'Create a schedule', status: 201, body: scheduleBody, docs: { errors: [409] },
          handler: ({ user, body }) => svc.createSchedule(user!, body),
        }),
        defineRoute({
          method: 'GET', path: '/jobs/schedules/:id', tags, auth: 'admin', summary: 'Get a schedule', params: idParams, docs: { errors: [404] },
          handler: ({ user, params }) => svc.getSchedule(user!, params.id),
        }),
        defineRoute({
          method: 'PATCH', path: '/jobs/schedules/:id', tags, auth: 'admin', summary: 'Update a schedule', params: idParams, body: scheduleBody, docs: { errors: [404, 409] },
          handler: ({ user, params, body }) => svc.updateSchedule(user!, params.id, body),
        }),
        defineRoute({
          method: 'DELETE', path: '/jobs/schedules/:id', tags, auth: 'admin', summary: 'Delete a schedule', params: idParams, docs: { errors: [404] },
          handler: async ({ user, params }) => {
            await svc.deleteSchedule(user!, params.id);
          },
        }),
        defineRoute({
          method: 'POST', path: '/jobs/schedules/:id/run', tags, auth: 'admin', summary: 'Run a schedule now', status: 202, params: idParams, body: scheduleRunBody,
          description: '`params` overrides the schedule\'s parameters when `allow_param_override` is true (422 otherwise).',
          handler: ({ user, params, body }) => svc.runSchedule(user!, params.id, body.params),
        }),
        defineRoute({
          method: 'GET', path: '/jobs/runs', tags, auth: 'admin', summary: 'List runs (newest first)', query: listRunsQuery, response: runsPageResponse,
          docs: { responseHeaders: { 'X-Total-Count': 'Matching runs', 'X-Page': 'Page', 'X-Per-Page': 'Page size', 'X-Total-Pages': 'Pages' } },
          handler: async ({ user, query, ctx }) => {
            const res = await svc.listRuns(user!, query);
            ctx.set('X-Total-Count', String(res.total));
            ctx.set('X-Page', String(res.page));
            ctx.set('X-Per-Page', String(res.per_page));
            ctx.set('X-Total-Pages', String(res.total_pages));
            return res;
          },
        }),
        defineRoute({
          method: 'GET', path: '/jobs/runs/:run_id', tags, auth: 'admin', summary: 'One run with live progress and logs', params: runIdParams, response: runResponse, docs: { errors: [404] },
          handler: ({ user, params }) => svc.getRun(user!, params.run_id),
        }),
        defineRoute({
          method: 'GET', path: '/jobs/runs/:run_id/logs', tags, auth: 'admin', summary: 'Server-sent events: log lines and progress of a run until it ends', params: runIdParams,
          description: 'Events `log` ({timestamp, level, message, percentage}), `progress` ({status, progress_current, progress_total, progress_message, percentage}) and a final `end` ({status, result, error}).',
          docs: { errors: [404] },
          handler: async ({ user, params, ctx }) => {
            await svc.getRun(user!, params.run_id);
            const stop = new AbortController();
            const stream = new PassThrough();
            ctx.req.on('close', () => stop.abort());
            ctx.status = 200;
            ctx.set({ 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-cache, no-transform', 'X-Accel-Buffering': 'no' });
            ctx.body = stream;
            stream.write(': run log stream\n\n');
            // A comment line now and then keeps proxies from closing a quiet stream.
            const ping = setInterval(() => stream.write(': ping\n\n'), 15_000);
            void (async () => {
              let n = 0;
              try {
                for await (const e of svc.watch(user!, params.run_id, stop.signal)) {
                  stream.write(`id: ${n++}\nevent: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`);
                }
              } catch (err) {
                log.warn({ err, run_id: params.run_id }, 'run log stream failed');
              } finally {
                clearInterval(ping);
                stream.end();
              }
            })();
          },
        }),
        defineRoute({
          method: 'POST', path: '/jobs/runs/:run_id/cancel', tags, auth: 'admin', summary: 'Cancel a pending or running run', params: runIdParams, response: runResponse,
          docs: { errors: [404, 409] },
          handler: ({ user, params }) => svc.cancel(user!, params.run_id),
        }),
        defineRoute({
          method: 'POST', path: '/jobs/run/:job_name', tags, auth: 'admin', summary: 'Trigger a job; answers 202 with the pending run', status: 202,
          params: jobNameParams, body: triggerBody, response: runResponse, docs: { errors: [404] },
          handler: ({ user, params, body }) => svc.triggerAs(user!, params.job_name, body.parameters),
        }),
        defineRoute({
          method: 'POST', path: '/jobs/run', tags, auth: 'admin', summary: 'Trigger a job (extended model)', status: 202, body: runBody, response: triggerResponse,
          docs: { errors: [404] },
          handler: async ({ user, body }) => {
            const run = await svc.triggerAs(user!, body.job, body.params, body.tenant_id, ['body', 'params']);
            return { run_id: run.id, status: 'pending' as const, message: `Job "${body.job}" queued` };
          },
        }),
        defineRoute({
          method: 'POST', path: '/jobs/check-schedules', tags, auth: 'system', summary: 'Run every due schedule now',
          handler: ({ user }) => svc.checkSchedules(user!),
        }),
        defineRoute({
          method: 'GET', path: '/jobs/chains', tags, auth: 'system', summary: 'List chains',
          handler: ({ user }) => svc.listChains(user!),
        }),
        defineRoute({
          method: 'POST', path: '/jobs/chains', tags, auth: 'system', summary: 'Create a chain', status: 201, body: chainBody, docs: { errors: [409] },
          handler: ({ user, body }) => svc.createChain(user!, body),
        }),
        defineRoute({
          method: 'GET', path: '/jobs/chains/:id', tags, auth: 'system', summary: 'Get a chain', params: idParams, docs: { errors: [404] },
          handler: ({ user, params }) => svc.getChain(user!, params.id),
        }),
        defineRoute({
          method: 'PATCH', path: '/jobs/chains/:id', tags, auth: 'system', summary: 'Update a chain', params: idParams, body: chainPatch, docs: { errors: [404, 409] },
          handler: ({ user, params, body }) => svc.updateChain(user!, params.id, body),
        }),
        defineRoute({
          method: 'DELETE', path: '/jobs/chains/:id', tags, auth: 'system', summary: 'Delete a chain (not a built-in one)', params: idParams, docs: { errors: [404, 409] },
          handler: async ({ user, params }) => {
            await svc.deleteChain(user!, params.id);
          },
        }),
        defineRoute({
          method: 'POST', path: '/jobs/chains/:id/run', tags, auth: 'system', summary: 'Run a chain; answers 202 with its coordinating run', status: 202,
          params: idParams, body: chainRunBody, response: runResponse, docs: { errors: [404] },
          handler: ({ user, params, body }) => svc.runChain(user!, params.id, body.params),
        }),
      ],
      graphql: (builder) => jobsGraphql(builder, svc),
    };
  },
});

export default jobsPlugin;
