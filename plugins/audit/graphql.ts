import type { Builder } from '../../core/graphql.ts';
import { pageObject, parseInput, givenArgs, scopes } from '../../core/graphql.ts';
import { AUDIT_FIELDS, type AuditEntryView } from './model.ts';
import { listQuery, liveQuery, statsQuery } from './schemas.ts';
import { AUDIT_PERMISSIONS, type AuditService, type AuditStats } from './service.ts';
import { permit } from '../../core/permissions.ts';
import type { Actor } from '../../core/context.ts';
import type { AuditEntryModel } from './model.ts';
import { newAuditEntries } from './live.ts';
import { unsettle, type LiveSubscriptions } from '../events/public/live.ts';

/**
 * GraphQL fragment: queries `auditLog` and `auditStats`, the same service and the same zod inputs
 * (and so the same access rules and `VALIDATION_ERROR`s) as `GET /admin/audit-log` and
 * `GET /admin/audit-log/stats`; subscription `auditEntries` (new entries, with the list's filter and access rules).
 */
export function auditGraphql(builder: Builder, { audit, model, realtime, pollMs }: { audit: AuditService; model: AuditEntryModel; realtime: LiveSubscriptions; pollMs: number }): void {
  const Entry = builder.objectRef<AuditEntryView>('AuditEntry');
  // Every field from the entry's single definition (model.ts): object ids as String (`id` as ID).
  const GQL_TYPES = { id: 'String', string: 'String', date: 'DateTime', json: 'JSON' } as const;
  Entry.implement({
    fields: (t) =>
      Object.fromEntries(
        AUDIT_FIELDS.map((f) => [
          f.name,
          t.field({ type: f.name === 'id' ? 'ID' : GQL_TYPES[f.kind], nullable: f.nullable, resolve: (e) => e[f.name] as never }),
        ]),
      ),
  });
  const Page = pageObject(builder, 'AuditLogPage', Entry);
  const UserCount = builder.objectRef<AuditStats['by_user'][number]>('AuditUserCount');
  UserCount.implement({
    fields: (t) => ({
      user_id: t.exposeString('user_id'),
      user_name: t.exposeString('user_name'),
      count: t.exposeInt('count', { nullable: false }),
    }),
  });
  const PeriodCount = builder.objectRef<AuditStats['timeline'][number]>('AuditPeriodCount');
  PeriodCount.implement({
    fields: (t) => ({
      period: t.exposeString('period', { nullable: false }),
      count: t.exposeInt('count', { nullable: false }),
    }),
  });
  const Stats = builder.objectRef<AuditStats>('AuditStats');
  Stats.implement({
    fields: (t) => ({
      total_entries: t.exposeInt('total_entries', { nullable: false }),
      by_operation: t.expose('by_operation', { type: 'JSON', nullable: false }),
      by_resource: t.expose('by_resource', { type: 'JSON', nullable: false }),
      by_user: t.expose('by_user', { type: [UserCount], nullable: false }),
      timeline: t.expose('timeline', { type: [PeriodCount], nullable: false }),
    }),
  });
  builder.queryFields((t) => ({
    auditLog: t.withAuth(scopes(AUDIT_PERMISSIONS.list)).field({
      type: Page, nullable: false, description: 'Audit entries, as GET /admin/audit-log',
      args: {
        resource: t.arg.string(), resource_id: t.arg.string(), user_id: t.arg.string(), operation: t.arg.string(),
        date_from: t.arg.string(), date_to: t.arg.string(), page: t.arg.int(), per_page: t.arg.int(), sort: t.arg.string(),
      },
      resolve: (_r, a, ctx) => audit.list(ctx.actor, parseInput(listQuery, givenArgs(a))),
    }),
    auditStats: t.withAuth(scopes(AUDIT_PERMISSIONS.stats)).field({
      type: Stats, nullable: false, description: 'Audit aggregates, as GET /admin/audit-log/stats',
      args: { resource: t.arg.string(), user_id: t.arg.string(), date_from: t.arg.string(), date_to: t.arg.string(), group_by: t.arg.string() },
      resolve: (_r, a, ctx) => audit.stats(ctx.actor, parseInput(statsQuery, givenArgs(a))),
    }),
  }));
  builder.subscriptionFields((t) => ({
    auditEntries: t.withAuth(scopes(AUDIT_PERMISSIONS.watch)).field({
      type: Entry, nullable: false,
      description: 'New audit entries as they are recorded, for those who may list the audit log (same filters and scope as auditLog)',
      args: { resource: t.arg.string(), resource_id: t.arg.string(), user_id: t.arg.string(), operation: t.arg.string(), date_from: t.arg.string(), date_to: t.arg.string() },
      subscribe: async (_r, a, ctx) => {
        const f = parseInput(liveQuery, givenArgs(a));
        // The declared permission is checked again at every poll, so an administrator who loses the
        // role stops receiving (the stream ends with ACCESS_DENIED).
        const live = (actor: Actor) => (permit(AUDIT_PERMISSIONS.watch, actor), audit.filterOf(actor, f));
        return realtime.subscribe(ctx, (_actor, signal, current) => newAuditEntries(model, () => live(current()), { pollMs, lookbackMs: 2000 }, signal));
      },
      resolve: (e) => unsettle(e),
    }),
  }));
}
