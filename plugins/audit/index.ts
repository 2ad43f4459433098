import { z } from 'zod';
import { definePlugin } from '../../core/plugin.ts';
import { defineRoute } from '../../core/http/route.ts';
import { isDatabaseUnavailable } from '../../core/http/map-error.ts';
import { DEFAULT_DENY_FIELDS, DEFAULT_IGNORED_FIELDS } from './diff.ts';
import { auditModel } from './model.ts';
import {
  exportQuery, exportResponse, listQuery, listResponse, retentionQuery, retentionResponse, statsQuery, statsResponse,
} from './schemas.ts';
import { AUDIT_PERMISSIONS, AuditService, type AuditLogger } from './service.ts';
import { auditGraphql } from './graphql.ts';
import { auditMetrics } from './metrics.ts';

export type { AuditActor, AuditLogger, ScrubInput } from './service.ts';
export { DEFAULT_DENY_FIELDS, DEFAULT_IGNORED_FIELDS } from './diff.ts';

declare module '../../core/services.ts' {
  interface Services {
    audit: AuditLogger;
  }
}

/** Options of the audit plugin: `auditPlugin.configure({ ... })`. */
export const auditOptions = z.object({
  /** Field names never written into `changes`/`snapshot`, at any depth. Replaces the default list; spread `DEFAULT_DENY_FIELDS` to extend it. */
  deny_fields: z.array(z.string().min(1)).default([...DEFAULT_DENY_FIELDS]),
  /** Top-level fields whose change alone is no change (server-maintained fields). */
  ignored_fields: z.array(z.string().min(1)).default([...DEFAULT_IGNORED_FIELDS]),
});

/**
 * The audit log: records every change whose event on the log asks for an entry (a durable sink of
 * the event log: resources, identity, payments, job schedules and chains, webhook endpoints,
 * consents, privacy erasures), offers the `audit` service (scrubbing, flush), and serves `/admin/audit-log` (list, stats,
 * export, retention) plus GraphQL `auditLog` / `auditStats`.
 */
export const auditPlugin = definePlugin({
  name: 'audit',
  options: auditOptions,
  setup({ db, config, options, services, log, tenancy }) {
    const model = auditModel(db);
    const audit = new AuditService(
      model,
      {
        enabled: config.AUDIT_LOG_ENABLED,
        tenancy,
        denyFields: options.deny_fields,
        ignoredFields: options.ignored_fields,
        // Entries of writes acknowledged just before the database went away are written once it is back.
        retryWhen: isDatabaseUnavailable,
        observeFlush: auditMetrics(services.get('metrics')),
        // Reads see the entries still waiting in the relay's batch (this process's own writes).
        flushEvents: () => services.get('events').flush(),
      },
      log,
    );
    services.provide('audit', audit);
    // Every audited change carries its event: its entry comes from the event log, durably.
    if (config.AUDIT_LOG_ENABLED) services.get('events').addSink({ name: 'audit', types: '*', write: (events) => audit.recordEvents(events) });
    const tags = ['audit'];

    return {
      routes: [
        defineRoute({
          method: 'GET', path: '/admin/audit-log', tags, auth: AUDIT_PERMISSIONS.list, summary: 'List audit entries',
          query: listQuery, response: listResponse,
          handler: ({ actor, query }) => audit.list(actor, query),
        }),
        defineRoute({
          method: 'GET', path: '/admin/audit-log/stats', tags, auth: AUDIT_PERMISSIONS.stats, summary: 'Audit entry counts by operation, resource, user and period',
          query: statsQuery, response: statsResponse,
          handler: ({ actor, query }) => audit.stats(actor, query),
        }),
        defineRoute({
          method: 'GET', path: '/admin/audit-log/export', tags, auth: AUDIT_PERMISSIONS.export, summary: 'Download audit entries as JSON or CSV',
          query: exportQuery, response: exportResponse,
          docs: { responseHeaders: { 'Content-Disposition': 'attachment; filename="audit-log-<timestamp>.json|csv"' } },
          handler: async ({ actor, query, ctx }) => {
            const out = await audit.export(actor, query);
            ctx.set('Content-Disposition', `attachment; filename="${out.filename}"`);
            ctx.body = out.stream;
            ctx.type = out.contentType;
          },
        }),
        defineRoute({
          method: 'DELETE', path: '/admin/audit-log/retention', tags, auth: AUDIT_PERMISSIONS.purge, summary: 'Delete audit entries older than N days',
          query: retentionQuery(config.AUDIT_LOG_RETENTION_DAYS), response: retentionResponse,
          // The actor's scope: every tenant, or the one named by `X-Tenant-Id`.
          handler: async ({ actor, query }) => {
            const res = await audit.purge(actor, query.older_than_days);
            return { message: `Deleted ${res.deleted_count} audit entries older than ${query.older_than_days} days`, ...res };
          },
        }),
      ],
      jobs: [
        {
          name: 'cleanup_audit_log',
          description: 'Delete audit entries older than JOBS_AUDIT_RETENTION_DAYS',
          timeout: 600,
          async run(ctx) {
            const res = await audit.purge(ctx.actor, config.JOBS_AUDIT_RETENTION_DAYS);
            ctx.log(`deleted ${res.deleted_count} audit entries created before ${res.cutoff_date.toISOString()}`);
            return res;
          },
        },
      ],
      graphql: (builder) => auditGraphql(builder, { audit, model, realtime: services.get('realtime'), pollMs: config.EVENTS_POLL_INTERVAL_MS }),
      // Shutdown writes what is still queued.
      close: () => audit.flush(),
    };
  },
});

export default auditPlugin;
