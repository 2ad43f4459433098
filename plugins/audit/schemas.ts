/**
 * Input and output schemas of the audit API. REST routes and GraphQL resolvers validate with the
 * same schemas, so both answer a bad value with the same 422 `VALIDATION_ERROR`.
 */
import { z } from 'zod';
import { objectId, pageQuery } from '../../core/http/schemas.ts';
import { pageSchema } from '../../lib/page.ts';
import { AUDIT_FIELDS, AUDIT_OPERATIONS, type AuditField } from './model.ts';

const DATE_ONLY = /^\d{4}-\d{2}-\d{2}$/;

/**
 * An ISO 8601 date (`2026-11-21`) or date-time with zone (`2026-11-21T10:00:00Z`, `...+01:00`),
 * as a Date. A date-time without zone is refused: its instant would depend on the server's zone.
 * As an upper bound (`end`), a bare date means the end of that UTC day, so `date_to=2026-11-21`
 * includes the whole day.
 */
const instant = (edge: 'start' | 'end') =>
  z
    .union([z.iso.date(), z.iso.datetime({ offset: true })], {
      error: 'must be an ISO 8601 date (2026-11-21) or date-time with zone (2026-11-21T10:00:00Z)',
    })
    .transform((s) => new Date(edge === 'end' && DATE_ONLY.test(s) ? `${s}T23:59:59.999Z` : s));

const dateRange = {
  date_from: instant('start').optional(),
  date_to: instant('end').optional(),
};

const dateOrder = (v: { date_from?: Date | undefined; date_to?: Date | undefined }, ctx: z.RefinementCtx) => {
  if (v.date_from && v.date_to && v.date_from > v.date_to) {
    ctx.addIssue({ code: 'custom', path: ['date_from'], message: 'date_from must not be after date_to' });
  }
};

const filterShape = {
  resource: z.string().min(1).max(200).optional(),
  /** Matches `item_id`. */
  resource_id: objectId.optional(),
  user_id: objectId.optional(),
  operation: z.enum(AUDIT_OPERATIONS).optional(),
  ...dateRange,
};

/** Top-level entry fields a listing may sort on; `_id` always breaks ties in the same direction. */
const SORT_FIELDS = ['created_at', 'resource', 'item_id', 'operation', 'user_id', 'user_name', 'ip', 'tenant_id'] as const;
export const DEFAULT_SORT = '-created_at';

/** `GET /admin/audit-log` and GraphQL `auditLog`. Unknown parameters are refused (422). */
export const listQuery = z
  .object({
    ...filterShape,
    ...pageQuery(50, 500).shape,
    sort: z.enum(SORT_FIELDS.flatMap((f) => [f, `-${f}`])).default(DEFAULT_SORT),
  })
  .strict()
  .superRefine(dateOrder);
export type ListQuery = z.output<typeof listQuery>;
/** GraphQL `auditEntries`: the list's filters, without paging or sort (new entries come in order). */
export const liveQuery = z.object(filterShape).strict().superRefine(dateOrder);

/** The filter part of a listing or export. */
export type AuditFilter = Pick<ListQuery, 'resource' | 'resource_id' | 'user_id' | 'operation' | 'date_from' | 'date_to'>;

const GROUP_BY = ['day', 'week', 'month'] as const;

/** `GET /admin/audit-log/stats` and GraphQL `auditStats`. */
export const statsQuery = z
  .object({
    resource: filterShape.resource,
    user_id: filterShape.user_id,
    ...dateRange,
    group_by: z.enum(GROUP_BY).default('day'),
  })
  .strict()
  .superRefine(dateOrder);
export type StatsQuery = z.output<typeof statsQuery>;

/** `GET /admin/audit-log/export`. */
export const exportQuery = z
  .object({
    ...filterShape,
    format: z.enum(['json', 'csv']).default('json'),
    limit: z.coerce.number().int().min(1).max(100_000).default(10_000),
  })
  .strict()
  .superRefine(dateOrder);
export type ExportQuery = z.output<typeof exportQuery>;

/** `DELETE /admin/audit-log/retention`; the default is the setting `AUDIT_LOG_RETENTION_DAYS`. */
export const retentionQuery = (defaultDays: number) =>
  z.object({ older_than_days: z.coerce.number().int().min(1).default(defaultDays) }).strict();

// Response shapes, for the OpenAPI description.

/** One API field as zod, from the entry's single definition (model.ts). */
const fieldSchema = (f: AuditField): z.ZodType => {
  const base =
    f.values ? z.enum(f.values as [string, ...string[]])
    : f.kind === 'date' ? z.iso.datetime()
    : f.kind === 'json' ? z.record(z.string(), z.unknown())
    : z.string();
  return f.nullable ? base.nullable() : base;
};

const entryResponse = z.object(Object.fromEntries(AUDIT_FIELDS.map((f) => [f.name, fieldSchema(f)])));

/** core's page of entries. */
export const listResponse = pageSchema(entryResponse);

export const statsResponse = z.object({
  total_entries: z.number().int(),
  by_operation: z.record(z.string(), z.number().int()),
  by_resource: z.record(z.string(), z.number().int()),
  by_user: z.array(z.object({ user_id: z.string().nullable(), user_name: z.string().nullable(), count: z.number().int() })),
  timeline: z.array(z.object({ period: z.string(), count: z.number().int() })),
});

export const exportResponse = z.array(entryResponse);

export const retentionResponse = z.object({ message: z.string(), deleted_count: z.number().int(), cutoff_date: z.iso.datetime() });
