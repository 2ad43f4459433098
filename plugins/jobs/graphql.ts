import type { Builder } from '../../core/graphql.ts';
import { pageObject, parseInput, givenArgs, scopes } from '../../core/graphql.ts';
import type { ChainView, RunView, ScheduleView } from './views.ts';
import type { RegistryEntry } from './registry.ts';
import { idParams, listRunsQuery, runBody, runIdParams, scheduleBody } from './schemas.ts';
import { nextFireTimes, previewCron, type CronPreview } from './cron-words.ts';
import { isTimeZone } from './cron.ts';
import { ValidationError } from '../../core/errors.ts';
import { JOB_PERMISSIONS, type JobsService } from './service.ts';
import { SCHEDULE_PERMISSIONS, type ScheduleService } from './schedules.ts';
import { CHAIN_PERMISSIONS, type ChainService } from './chains.ts';
import type { WatchEvent } from './service.ts';
import { unsettle, type LiveSubscriptions } from '../events/public/live.ts';

type LogView = NonNullable<RunView['logs']>[number];

/**
 * GraphQL fragment (the dashboard): `jobRegistry`, `jobSchedules`, `jobRuns(filter)`, `jobRun(id)`,
 * `jobChains`, `cronPreview`; mutations `triggerJob`, `cancelJobRun`, `upsertJobSchedule`, `deleteJobSchedule`; subscription `jobRun(id)`
 * (the run's log lines and progress until it ends, as GET /jobs/runs/{run_id}/logs). Same service, same
 * access rules as REST.
 */
export function jobsGraphql(builder: Builder, svc: JobsService, schedules: ScheduleService, chains: ChainService, realtime: LiveSubscriptions): void {
  const Entry = builder.objectRef<RegistryEntry>('JobRegistryEntry');
  Entry.implement({
    fields: (t) => ({
      name: t.exposeString('name', { nullable: false }),
      description: t.exposeString('description', { nullable: false }),
      timeout: t.exposeInt('timeout', { nullable: false }),
      max_attempts: t.exposeInt('max_attempts', { nullable: false }),
      params: t.expose('params', { type: 'JSON', nullable: false, description: 'name → {type, required, description, enum?}' }),
      per_tenant: t.exposeBoolean('per_tenant', { nullable: false }),
      timeout_seconds: t.exposeInt('timeout_seconds', { nullable: false }),
      retries: t.exposeInt('retries', { nullable: false }),
      plugin: t.exposeString('plugin', { nullable: false }),
    }),
  });

  const Log = builder.objectRef<LogView>('JobLogLine');
  Log.implement({
    fields: (t) => ({
      timestamp: t.expose('timestamp', { type: 'DateTime', nullable: false }),
      level: t.exposeString('level', { nullable: false }),
      message: t.exposeString('message', { nullable: false }),
      percentage: t.exposeFloat('percentage'),
    }),
  });

  const Run = builder.objectRef<RunView>('JobRun');
  Run.implement({
    fields: (t) => ({
      id: t.exposeID('id', { nullable: false }),
      job_name: t.exposeString('job_name', { nullable: false }),
      job_type: t.exposeString('job_type', { nullable: false }),
      status: t.exposeString('status', { nullable: false }),
      started_at: t.expose('started_at', { type: 'DateTime' }),
      completed_at: t.expose('completed_at', { type: 'DateTime' }),
      duration_ms: t.exposeInt('duration_ms'),
      duration_seconds: t.exposeFloat('duration_seconds'),
      parameters: t.expose('parameters', { type: 'JSON', nullable: false }),
      result: t.expose('result', { type: 'JSON' }),
      error: t.exposeString('error'),
      error_traceback: t.exposeString('error_traceback'),
      progress_current: t.exposeFloat('progress_current', { nullable: false }),
      progress_total: t.exposeFloat('progress_total'),
      progress_message: t.exposeString('progress_message'),
      percentage: t.exposeInt('percentage'),
      parent_job_id: t.exposeString('parent_job_id'),
      chain_index: t.exposeInt('chain_index'),
      attempt: t.exposeInt('attempt', { nullable: false }),
      max_attempts: t.exposeInt('max_attempts', { nullable: false }),
      triggered_by: t.exposeString('triggered_by'),
      trigger: t.exposeString('trigger', { nullable: false }),
      triggered_by_user: t.exposeString('triggered_by_user'),
      tenant_id: t.exposeString('tenant_id'),
      chain_id: t.exposeString('chain_id'),
      chain_run_id: t.exposeString('chain_run_id'),
      schedule_id: t.exposeString('schedule_id'),
      timeout_seconds: t.exposeInt('timeout_seconds', { nullable: false }),
      created_at: t.expose('created_at', { type: 'DateTime', nullable: false }),
      logs: t.field({ type: [Log], nullable: false, description: 'Empty in lists; ask jobRun(id) for them', resolve: (r) => r.logs ?? [] }),
    }),
  });

  const Page = pageObject(builder, 'JobRunPage', Run);

  const Schedule = builder.objectRef<ScheduleView>('JobSchedule');
  Schedule.implement({
    fields: (t) => ({
      id: t.exposeID('id', { nullable: false }),
      job_name: t.exposeString('job_name', { nullable: false }),
      description: t.exposeString('description'),
      cron_expression: t.exposeString('cron_expression', { nullable: false }),
      timezone: t.exposeString('timezone', { nullable: false }),
      is_enabled: t.exposeBoolean('is_enabled', { nullable: false }),
      type: t.exposeString('type', { nullable: false }),
      job_type: t.exposeString('job_type'),
      target: t.exposeString('target'),
      parameters: t.expose('parameters', { type: 'JSON', nullable: false }),
      allow_param_override: t.exposeBoolean('allow_param_override', { nullable: false }),
      max_attempts: t.exposeInt('max_attempts'),
      timeout_seconds: t.exposeInt('timeout_seconds'),
      chain: t.exposeStringList('chain', { nullable: false }),
      depends_on_schedules: t.exposeStringList('depends_on_schedules', { nullable: false }),
      dependency_mode: t.exposeString('dependency_mode', { nullable: false }),
      tenant_id: t.exposeString('tenant_id'),
      per_tenant: t.exposeBoolean('per_tenant', { nullable: false }),
      last_run_id: t.exposeString('last_run_id'),
      last_run_at: t.expose('last_run_at', { type: 'DateTime' }),
      last_run_status: t.exposeString('last_run_status'),
      next_run_at: t.expose('next_run_at', { type: 'DateTime' }),
      dependency_unmet: t.exposeBoolean('dependency_unmet', { nullable: false }),
      next_fire_times: t.field({
        type: ['DateTime'], nullable: false, description: 'The next fire times of the cron expression (whether or not the schedule is enabled), 1 to 20',
        args: { count: t.arg.int({ defaultValue: 5 }) },
        resolve: (s, a) => nextFireTimes(s.cron_expression, s.timezone, Math.min(Math.max(a.count ?? 5, 1), 20)),
      }),
    }),
  });

  const Preview = builder.objectRef<CronPreview>('CronPreview');
  Preview.implement({
    description: 'A cron expression checked, in words, and its next fire times',
    fields: (t) => ({
      expression: t.exposeString('expression', { nullable: false }),
      timezone: t.exposeString('timezone', { nullable: false }),
      valid: t.exposeBoolean('valid', { nullable: false }),
      error: t.exposeString('error', { description: "The parser's reason when invalid" }),
      description: t.exposeString('description', { description: 'In English, e.g. "At 02:30, on Monday to Friday (UTC)"' }),
      next: t.field({ type: ['DateTime'], nullable: false, resolve: (p) => p.next }),
    }),
  });

  type StepView = ChainView['steps'][number];
  const Step = builder.objectRef<StepView>('JobChainStep');
  Step.implement({
    fields: (t) => ({
      job: t.exposeString('job', { nullable: false }),
      params: t.expose('params', { type: 'JSON', nullable: false }),
      depends_on: t.exposeStringList('depends_on', { nullable: false }),
      on_failure: t.exposeString('on_failure'),
      retries: t.exposeInt('retries', { nullable: false }),
      retry_delay_seconds: t.exposeInt('retry_delay_seconds', { nullable: false }),
    }),
  });
  const Chain = builder.objectRef<ChainView>('JobChain');
  Chain.implement({
    fields: (t) => ({
      id: t.exposeID('id', { nullable: false }),
      name: t.exposeString('name', { nullable: false }),
      description: t.exposeString('description', { nullable: false }),
      is_system: t.exposeBoolean('is_system', { nullable: false }),
      default_on_failure: t.exposeString('default_on_failure', { nullable: false }),
      steps: t.expose('steps', { type: [Step], nullable: false }),
    }),
  });

  const Filter = builder.inputType('JobRunFilter', {
    fields: (t) => ({
      job_name: t.string(), status: t.string(), tenant_id: t.string(), schedule_id: t.string(), chain_run_id: t.string(), parent_job_id: t.string(),
    }),
  });

  builder.queryFields((t) => ({
    jobRegistry: t.withAuth(scopes(JOB_PERMISSIONS.registry)).field({
      type: [Entry], nullable: false, description: 'Registered jobs, as GET /jobs/registry',
      resolve: (_r, _a, ctx) => svc.registry(ctx.actor),
    }),
    jobSchedules: t.withAuth(scopes(SCHEDULE_PERMISSIONS.list)).field({
      type: [Schedule], nullable: false, description: 'Schedules, as GET /jobs/schedules',
      resolve: (_r, _a, ctx) => schedules.list(ctx.actor),
    }),
    jobRuns: t.withAuth(scopes(JOB_PERMISSIONS.listRuns)).field({
      type: Page, nullable: false, description: 'Runs, newest first, as GET /jobs/runs',
      args: { filter: t.arg({ type: Filter }), page: t.arg.int(), per_page: t.arg.int() },
      resolve: (_r, a, ctx) => svc.listRuns(ctx.actor, parseInput(listRunsQuery, givenArgs({ ...(a.filter ?? {}), page: a.page, per_page: a.per_page }))),
    }),
    jobRun: t.withAuth(scopes(JOB_PERMISSIONS.getRun)).field({
      type: Run, nullable: false, description: 'One run with progress and logs, as GET /jobs/runs/{run_id}',
      args: { id: t.arg.string({ required: true }) },
      resolve: (_r, a, ctx) => svc.getRun(ctx.actor, parseInput(runIdParams, { run_id: a.id }).run_id),
    }),
    cronPreview: t.withAuth(scopes('admin')).field({
      type: Preview, nullable: false, description: 'Check a cron expression, describe it and list its next fire times (administrators), for schedule editors',
      args: { expression: t.arg.string({ required: true }), timezone: t.arg.string({ defaultValue: 'UTC' }), count: t.arg.int({ defaultValue: 5 }) },
      resolve: (_r, a) => {
        const timezone = a.timezone ?? 'UTC';
        if (!isTimeZone(timezone)) throw new ValidationError([{ loc: ['args', 'timezone'], msg: `Unknown time zone "${timezone}"`, type: 'value_error' }]);
        return previewCron(a.expression.slice(0, 200), timezone, Math.min(Math.max(a.count ?? 5, 1), 20));
      },
    }),
    jobChains: t.withAuth(scopes(CHAIN_PERMISSIONS.list)).field({
      type: [Chain], nullable: false, description: 'Stored chains, as GET /jobs/chains (system administrators)',
      resolve: (_r, _a, ctx) => chains.list(ctx.actor),
    }),
  }));

  builder.mutationFields((t) => ({
    triggerJob: t.withAuth(scopes(JOB_PERMISSIONS.trigger)).field({
      type: Run, nullable: false, description: 'Queue a run, as POST /jobs/run',
      args: { job: t.arg.string({ required: true }), params: t.arg({ type: 'JSON' }), tenant_id: t.arg.string() },
      resolve: (_r, a, ctx) => {
        const actor = ctx.actor;
        const input = parseInput(runBody, givenArgs(a));
        return svc.triggerAs(actor, input.job, input.params, input.tenant_id, ['args', 'params']);
      },
    }),
    cancelJobRun: t.withAuth(scopes(JOB_PERMISSIONS.cancel)).field({
      type: Run, nullable: false, description: 'Cancel a pending or running run, as POST /jobs/runs/{run_id}/cancel',
      args: { id: t.arg.string({ required: true }) },
      resolve: (_r, a, ctx) => svc.cancel(ctx.actor, parseInput(runIdParams, { run_id: a.id }).run_id),
    }),
    upsertJobSchedule: t.withAuth(scopes(SCHEDULE_PERMISSIONS.create)).field({
      type: Schedule, nullable: false,
      description: 'Create a schedule (no id) or update one, as POST / PATCH /jobs/schedules; `input` takes the same fields as the REST body',
      args: { id: t.arg.string(), input: t.arg({ type: 'JSON', required: true }) },
      resolve: (_r, a, ctx) => {
        const actor = ctx.actor;
        const input = parseInput(scheduleBody, a.input, ['args', 'input']);
        return a.id ? schedules.update(actor, parseInput(idParams, { id: a.id }).id, input) : schedules.create(actor, input);
      },
    }),
    deleteJobSchedule: t.withAuth(scopes(SCHEDULE_PERMISSIONS.remove)).field({
      type: 'Boolean', nullable: false, description: 'Delete a schedule, as DELETE /jobs/schedules/{id} (true when done)',
      args: { id: t.arg.string({ required: true }) },
      resolve: async (_r, a, ctx) => {
        await schedules.remove(ctx.actor, parseInput(idParams, a).id);
        return true;
      },
    }),
  }));

  const Update = builder.objectRef<WatchEvent>('JobRunUpdate');
  const field = <K extends string>(e: WatchEvent, k: K) => (e.event === 'log' ? null : ((e.data as Record<string, unknown>)[k] ?? null));
  Update.implement({
    description: 'One step of a run as it goes: a new log line (`log`), changed progress (`progress`), or its end (`end`)',
    fields: (t) => ({
      event: t.string({ nullable: false, resolve: (e) => e.event }),
      log: t.field({ type: Log, resolve: (e) => (e.event === 'log' ? (e.data as LogView) : null) }),
      status: t.string({ resolve: (e) => field(e, 'status') as string | null }),
      progress_current: t.float({ resolve: (e) => field(e, 'progress_current') as number | null }),
      progress_total: t.float({ resolve: (e) => field(e, 'progress_total') as number | null }),
      progress_message: t.string({ resolve: (e) => field(e, 'progress_message') as string | null }),
      percentage: t.float({ resolve: (e) => field(e, 'percentage') as number | null }),
      result: t.field({ type: 'JSON', resolve: (e) => field(e, 'result') }),
      error: t.string({ resolve: (e) => field(e, 'error') as string | null }),
    }),
  });
  builder.subscriptionFields((t) => ({
    jobRun: t.withAuth(scopes(JOB_PERMISSIONS.watch)).field({
      type: Update, nullable: false,
      description: "A run's log lines and progress as they happen, then its end (who may see it: as GET /jobs/runs/{run_id})",
      args: { id: t.arg.string({ required: true }) },
      subscribe: async (_r, a, ctx) => {
        const id = parseInput(runIdParams, { run_id: a.id }).run_id;
        await svc.checkVisible(ctx.actor, id);
        return realtime.subscribe(ctx, (actor, signal) => svc.watch(actor, id, signal));
      },
      resolve: (e) => unsettle(e),
    }),
  }));
}
