import { PassThrough } from 'node:stream';
import type Koa from 'koa';
import { z } from 'zod';
import { defineRoute, type RouteDef } from '../../core/http/route.ts';
import type { Actor } from '../../core/context.ts';
import type { Logger } from '../../core/logger.ts';
import { pageHeaderDocs, setPageHeaders } from '../../lib/page.ts';
import {
  chainBody, chainPatch, chainResponse, chainRunBody, checkSchedulesResponse, idParams, registryResponse, scheduleResponse, jobNameParams, listRunsQuery, runBody, runIdParams, runResponse, runsPageResponse,
  scheduleBody, scheduleRunBody, triggerBody, triggerResponse,
} from './schemas.ts';
import { JOB_PERMISSIONS, type JobsService } from './service.ts';
import { SCHEDULE_PERMISSIONS, type ScheduleService } from './schedules.ts';
import { CHAIN_PERMISSIONS, type ChainService } from './chains.ts';

/** A comment line now and then keeps proxies from closing a quiet stream. */
const PING_MS = 15_000;

/** Answers with a server-sent event stream of `svc.watch` (the run was checked visible before). */
function streamRun(ctx: Koa.Context, svc: JobsService, actor: Actor, runId: string, log: Logger): void {
  const stop = new AbortController();
  const stream = new PassThrough();
  ctx.req.on('close', () => stop.abort());
  ctx.status = 200;
  ctx.set({ 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-cache, no-transform', 'X-Accel-Buffering': 'no' });
  ctx.body = stream;
  stream.write(': run log stream\n\n');
  const ping = setInterval(() => stream.write(': ping\n\n'), PING_MS);
  void (async () => {
    let n = 0;
    try {
      for await (const e of svc.watch(actor, runId, stop.signal)) stream.write(`id: ${n++}\nevent: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`);
    } catch (err) {
      log.warn({ err, run_id: runId }, 'run log stream failed');
    } finally {
      clearInterval(ping);
      stream.end();
    }
  })();
}

/** The REST routes of the jobs plugin, under `/jobs` (docs/jobs.md "Endpoints"). */
export function jobsRoutes(svc: JobsService, schedules: ScheduleService, chains: ChainService, log: Logger): RouteDef[] {
  const tags = ['jobs'];
  return [
    defineRoute({
      method: 'GET', path: '/jobs/registry', tags, auth: JOB_PERMISSIONS.registry, summary: 'Registered jobs', response: z.array(registryResponse),
      handler: ({ actor }) => svc.registry(actor),
    }),
    defineRoute({
      method: 'GET', path: '/jobs/registry/:job_name', tags, auth: JOB_PERMISSIONS.registryEntry, summary: 'One registered job', params: jobNameParams, response: registryResponse, docs: { errors: [404] },
      handler: ({ actor, params }) => svc.registryEntry(actor, params.job_name),
    }),
    defineRoute({
      method: 'GET', path: '/jobs/schedules', tags, auth: SCHEDULE_PERMISSIONS.list, summary: 'List schedules', response: z.array(scheduleResponse),
      handler: ({ actor }) => schedules.list(actor),
    }),
    defineRoute({
      method: 'POST', path: '/jobs/schedules', tags, auth: SCHEDULE_PERMISSIONS.create, summary: 'Create a schedule', status: 201, body: scheduleBody, response: scheduleResponse, docs: { errors: [409] },
      handler: ({ actor, body }) => schedules.create(actor, body),
    }),
    defineRoute({
      method: 'GET', path: '/jobs/schedules/:id', tags, auth: SCHEDULE_PERMISSIONS.get, summary: 'Get a schedule', params: idParams, response: scheduleResponse, docs: { errors: [404] },
      handler: ({ actor, params }) => schedules.get(actor, params.id),
    }),
    defineRoute({
      method: 'PATCH', path: '/jobs/schedules/:id', tags, auth: SCHEDULE_PERMISSIONS.update, summary: 'Update a schedule', params: idParams, body: scheduleBody, response: scheduleResponse, docs: { errors: [404, 409] },
      handler: ({ actor, params, body }) => schedules.update(actor, params.id, body),
    }),
    defineRoute({
      method: 'DELETE', path: '/jobs/schedules/:id', tags, auth: SCHEDULE_PERMISSIONS.remove, summary: 'Delete a schedule', status: 204, params: idParams, docs: { errors: [404] },
      handler: async ({ actor, params }) => {
        await schedules.remove(actor, params.id);
      },
    }),
    defineRoute({
      method: 'POST', path: '/jobs/schedules/:id/run', tags, auth: SCHEDULE_PERMISSIONS.runNow, summary: 'Run a schedule now', status: 202, params: idParams, body: scheduleRunBody, response: runResponse,
      description: '`params` overrides the schedule\'s parameters when `allow_param_override` is true (422 otherwise).',
      handler: ({ actor, params, body }) => schedules.runNow(actor, params.id, body.params),
    }),
    defineRoute({
      method: 'GET', path: '/jobs/runs', tags, auth: JOB_PERMISSIONS.listRuns, summary: 'List runs (newest first)', query: listRunsQuery, response: runsPageResponse,
      docs: { responseHeaders: pageHeaderDocs('Matching runs') },
      handler: async ({ actor, query, ctx }) => setPageHeaders(ctx, await svc.listRuns(actor, query)),
    }),
    defineRoute({
      method: 'GET', path: '/jobs/runs/:run_id', tags, auth: JOB_PERMISSIONS.getRun, summary: 'One run with live progress and logs', params: runIdParams, response: runResponse, docs: { errors: [404] },
      handler: ({ actor, params }) => svc.getRun(actor, params.run_id),
    }),
    defineRoute({
      method: 'GET', path: '/jobs/runs/:run_id/logs', tags, auth: JOB_PERMISSIONS.watch, summary: 'Server-sent events: log lines and progress of a run until it ends', params: runIdParams,
      description: 'Events `log` ({timestamp, level, message, percentage}), `progress` ({status, progress_current, progress_total, progress_message, percentage}) and a final `end` ({status, result, error}).',
      docs: { errors: [404], mediaTypes: ['text/event-stream'] },
      handler: async ({ actor, params, ctx }) => {
        await svc.checkVisible(actor, params.run_id);
        streamRun(ctx, svc, actor, params.run_id, log);
      },
    }),
    defineRoute({
      method: 'POST', path: '/jobs/runs/:run_id/cancel', tags, auth: JOB_PERMISSIONS.cancel, summary: 'Cancel a pending or running run', params: runIdParams, response: runResponse,
      docs: { errors: [404, 409] },
      handler: ({ actor, params }) => svc.cancel(actor, params.run_id),
    }),
    defineRoute({
      method: 'POST', path: '/jobs/run/:job_name', tags, auth: JOB_PERMISSIONS.trigger, summary: 'Trigger a job; answers 202 with the pending run', status: 202,
      params: jobNameParams, body: triggerBody, response: runResponse, docs: { errors: [404] },
      handler: ({ actor, params, body }) => svc.triggerAs(actor, params.job_name, body.parameters),
    }),
    defineRoute({
      method: 'POST', path: '/jobs/run', tags, auth: JOB_PERMISSIONS.trigger, summary: 'Trigger a job (extended model)', status: 202, body: runBody, response: triggerResponse,
      docs: { errors: [404] },
      handler: async ({ actor, body }) => {
        const run = await svc.triggerAs(actor, body.job, body.params, body.tenant_id, ['body', 'params']);
        return { run_id: run.id, status: 'pending' as const, message: `Job "${body.job}" queued` };
      },
    }),
    defineRoute({
      method: 'POST', path: '/jobs/check-schedules', tags, auth: SCHEDULE_PERMISSIONS.checkDue, summary: 'Run every due schedule now', response: checkSchedulesResponse,
      handler: ({ actor }) => schedules.checkDue(actor),
    }),
    defineRoute({
      method: 'GET', path: '/jobs/chains', tags, auth: CHAIN_PERMISSIONS.list, summary: 'List chains', response: z.array(chainResponse),
      handler: ({ actor }) => chains.list(actor),
    }),
    defineRoute({
      method: 'POST', path: '/jobs/chains', tags, auth: CHAIN_PERMISSIONS.create, summary: 'Create a chain', status: 201, body: chainBody, response: chainResponse, docs: { errors: [409] },
      handler: ({ actor, body }) => chains.create(actor, body),
    }),
    defineRoute({
      method: 'GET', path: '/jobs/chains/:id', tags, auth: CHAIN_PERMISSIONS.get, summary: 'Get a chain', params: idParams, response: chainResponse, docs: { errors: [404] },
      handler: ({ actor, params }) => chains.get(actor, params.id),
    }),
    defineRoute({
      method: 'PATCH', path: '/jobs/chains/:id', tags, auth: CHAIN_PERMISSIONS.update, summary: 'Update a chain', params: idParams, body: chainPatch, response: chainResponse, docs: { errors: [404, 409] },
      handler: ({ actor, params, body }) => chains.update(actor, params.id, body),
    }),
    defineRoute({
      method: 'DELETE', path: '/jobs/chains/:id', tags, auth: CHAIN_PERMISSIONS.remove, summary: 'Delete a chain (not a built-in one)', status: 204, params: idParams, docs: { errors: [404, 409] },
      handler: async ({ actor, params }) => {
        await chains.remove(actor, params.id);
      },
    }),
    defineRoute({
      method: 'POST', path: '/jobs/chains/:id/run', tags, auth: CHAIN_PERMISSIONS.run, summary: 'Run a chain; answers 202 with its coordinating run', status: 202,
      params: idParams, body: chainRunBody, response: runResponse, docs: { errors: [404] },
      handler: ({ actor, params, body }) => chains.run(actor, params.id, body.params),
    }),
  ] as RouteDef[];
}
