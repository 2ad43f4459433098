import { definePlugin } from '../../core/plugin.ts';
import { jobModels } from './model.ts';
import { jobEventTypes, jobsOptions } from './schemas.ts';
import { JobRegistry, registerJob } from './registry.ts';
import { RunStore } from './store.ts';
import { RunLauncher } from './runs.ts';
import { JobAccess } from './access.ts';
import { fanoutCoordinator, tenantIds } from './coordinators.ts';
import { DocumentChanges, notRemoved } from '../events/public/outbox.ts';
import { chainView, scheduleView } from './views.ts';
import { ChainService } from './chains.ts';
import { ScheduleService } from './schedules.ts';
import { JobsService } from './service.ts';
import { builtinJobs } from './builtins.ts';
import { jobsRoutes } from './routes.ts';
import { jobsGraphql } from './graphql.ts';
import { jobMetrics } from './metrics.ts';

export type { JobsService } from './service.ts';
export { jobsOptions } from './schemas.ts';

/**
 * Background jobs: the registry of every plugin's `jobs`, persisted runs with progress and logs,
 * cron schedules, stored chains, per-tenant fan-out, REST under `/jobs` and GraphQL. Dispatch,
 * cron and cross-replica locking are Agenda's (Mongo backend, on the app's connection). Does
 * nothing unless `JOBS_ENABLED` is true. This file only wires; see docs/jobs.md.
 */
export const jobsPlugin = definePlugin({
  name: 'jobs',
  enabledBy: 'JOBS_ENABLED',
  options: jobsOptions,
  async setup({ db, config, options, services, kernel, tenancy, log }) {
    if (!config.JOBS_ENABLED) return {};
    // Agenda loads only when the plugin is on: servers without jobs do not pay its start-up time.
    const { Engine } = await import('./engine.ts');
    const models = jobModels(db);
    const identity = services.get('identity');
    const registry = new JobRegistry();
    const events = services.get('events');
    const store = new RunStore(models.Run, config.JOBS_RETRY_DELAY_MS, events);
    events.addSource(store.source);
    const launcher = new RunLauncher(store, registry);
    const access = new JobAccess(tenancy, registry);
    // Schedules' and chains' administrative writes carry their events (and audit entries) in their outboxes.
    const chainChanges = new DocumentChanges(() => events, { name: 'job_chains', model: models.Chain, view: (d) => chainView(d as never), tenantScoped: false }, {
      created: 'job_chain.created', updated: 'job_chain.updated', deleted: 'job_chain.deleted',
    });
    const scheduleChanges = new DocumentChanges(() => events, { name: 'job_schedules', model: models.Schedule, view: (d) => scheduleView(d as never) }, {
      created: 'job_schedule.created', updated: 'job_schedule.updated', deleted: 'job_schedule.deleted',
    });
    events.addSource(chainChanges.source);
    events.addSource(scheduleChanges.source);
    const chains = new ChainService(models, launcher, config.JOBS_POLL_INTERVAL_MS, chainChanges);
    const schedules = new ScheduleService(models, access, launcher, chains, {
      defaultTimezone: config.JOBS_DEFAULT_TIMEZONE,
      minIntervalSeconds: config.JOBS_MIN_SCHEDULE_INTERVAL_SECONDS,
    }, log, scheduleChanges);
    const afterFinish = (run: Parameters<ScheduleService['afterFinish']>[0]) => schedules.afterFinish(run);
    const svc = new JobsService({ models, store, launcher, access, afterFinish, pollMs: config.JOBS_POLL_INTERVAL_MS });
    const engine = new Engine(
      {
        store,
        job: (name) => registry.get(name),
        coordinators: { fanout: fanoutCoordinator(launcher, () => tenantIds(identity), config.JOBS_POLL_INTERVAL_MS), chain: chains.coordinator },
        afterFinish,
        scheduleDue: (id) => schedules.due(id),
        log,
        metrics: jobMetrics(services.get('metrics'), models.Run as never),
      },
      { db: db.db!, lockTtlMs: config.JOBS_LOCK_TTL_SECONDS * 1000, pollMs: config.JOBS_POLL_INTERVAL_MS, concurrency: config.JOBS_CONCURRENCY },
    );
    launcher.dispatcher = engine;
    services.provide('jobs', svc);

    return {
      jobs: builtinJobs(svc, schedules, config, identity),
      eventTypes: jobEventTypes,
      async ready() {
        registry.set(kernel.jobs().map(registerJob));
        // The unique dedupe index must exist before the first run is queued.
        await Promise.all([models.Run.init(), models.Schedule.init(), models.Chain.init()]);
        for (const c of options.chains) await chains.ensureSystemChain(c);
        for (const s of await models.Schedule.find(notRemoved).lean()) await engine.syncSchedule(s as never);
        await engine.start();
      },
      close: () => engine.stop(),
      routes: jobsRoutes(svc, schedules, chains, log),
      graphql: (builder) => jobsGraphql(builder, svc, schedules, chains, services.get('realtime')),
    };
  },
});

export default jobsPlugin;
