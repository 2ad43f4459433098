import { Readable, pipeline } from 'node:stream';
import { stringify } from 'csv-stringify';
import { Types } from 'mongoose';
import type { Actor } from '../../core/context.ts';
import { requireRole, type Filter } from '../../core/access.ts';
import type { Permissions } from '../../core/permissions.ts';
import type { Logger } from '../../core/logger.ts';
import { pageOf, type Page } from '../../lib/page.ts';
import type { Tenancy } from '../../core/tenancy.ts';
import { traced } from '../../core/observability/tracing.ts';
import { type EventDoc, OUTBOX_FIELD } from '../events/public/outbox.ts';
import { entryOfEvent } from './from-events.ts';
import { scrubEntries, type ScrubInput } from './scrub.ts';
import { Redactor } from './diff.ts';
import { CSV_COLUMNS, entryView, type AuditEntryInput, type AuditEntryModel, type AuditEntryRecord, type AuditEntryView } from './model.ts';
import { csvRow, jsonArray, mapped, onlyDuplicateIds, sortOf } from './format.ts';
import { DEFAULT_SORT, type AuditFilter, type ExportQuery, type ListQuery, type StatsQuery } from './schemas.ts';

/** Who made a change: anything with an id and optionally a display name (an `Actor` fits). */
export interface AuditActor {
  id: string;
  name?: string | null;
}

/**
 * What other plugins call on the audit log, as `services.get('audit')`. Entries themselves come
 * only from the event log: a change that must be audited carries `meta.audit` in its event (see
 * `AuditedChange`), and this plugin, a durable sink of the relay, writes the entry from it.
 */
export interface AuditLogger {
  /**
   * Remove a data subject's personal data from existing entries without deleting them (privacy
   * erasure, docs/privacy.md). In every entry made by the subject (`user_id`) or about one of
   * `documents`: `user_name` of the subject's own entries becomes `replacement`; the listed
   * `fields` of a document, in `changes` (`old`/`new`) and `snapshot`, become `replacement`
   * (nulls stay null); any string in `changes`/`snapshot` equal to one of `values` (case-insensitive,
   * e.g. the subject's email and name) becomes `replacement`. Idempotent. Resolves the number of
   * entries changed.
   */
  scrubSubject(input: ScrubInput): Promise<{ scrubbed: number }>;
  /** Resolves once the events this process has relayed so far have their entries. */
  flush(): Promise<void>;
}

export type { ScrubInput } from './scrub.ts';

export interface AuditServiceOptions {
  /** `AUDIT_LOG_ENABLED`. */
  enabled: boolean;
  /** The app's tenant policy (`ctx.tenancy`): whether tenant administrators see only their own tenant. */
  tenancy: Tenancy;
  denyFields: readonly string[];
  ignoredFields: readonly string[];
  /** A failed write of a batch that is retried (the relay keeps the batch): the database unreachable. */
  retryWhen?: (err: unknown) => boolean;
  /** Stores the events still waiting in the relay (their entries come with them). */
  flushEvents?: () => Promise<void>;
  /** Times a batch write (plugins/audit/metrics.ts). */
  observeFlush: <T>(entries: number, write: () => Promise<T>) => Promise<T>;
}

/** One page of audit entries: core's offset page, as every offset list answers it. */
export type AuditPage = Page<AuditEntryView>;

export interface AuditStats {
  total_entries: number;
  by_operation: Record<string, number>;
  by_resource: Record<string, number>;
  by_user: { user_id: string | null; user_name: string | null; count: number }[];
  timeline: { period: string; count: number }[];
}

export interface AuditExport {
  stream: Readable;
  contentType: string;
  filename: string;
}

/** `$dateToString` formats of the stats timeline (UTC). `%G-W%V` is the ISO week-numbering year and zero-padded ISO week. */
const PERIOD_FORMAT = { day: '%Y-%m-%d', week: '%G-W%V', month: '%Y-%m' } as const;

const DAY_MS = 86_400_000;


/**
 * The audit log: writes the entries of changes from their events (a durable sink of the event log,
 * `recordEvents`) and answers the admin queries. No Koa or GraphQL here.
 */
/** Who may call each audit log operation: the one declaration its REST route and GraphQL field read. */
export const AUDIT_PERMISSIONS = { list: 'admin', stats: 'admin', export: 'admin', watch: 'admin', purge: 'system' } as const satisfies Permissions;

export class AuditService implements AuditLogger {
  private readonly redactor: Redactor;
  private readonly ignored: ReadonlySet<string>;

  constructor(
    private readonly model: AuditEntryModel,
    private readonly opts: AuditServiceOptions,
    private readonly log: Logger,
  ) {
    this.redactor = new Redactor(opts.denyFields);
    // The event log's outbox is bookkeeping of the write itself, never a change of the document.
    this.ignored = new Set([...opts.ignoredFields, OUTBOX_FIELD]);
  }

  // --- recording -------------------------------------------------------------------------

  /**
   * The event log's durable sink: writes the entries of the events that ask for one, idempotently
   * (an entry's `_id` comes from its event). An unreachable database throws, so the relay keeps the
   * batch and its outboxes and tries again; any other failure is logged with the entries it lost,
   * so a broken audit collection cannot stop the event log.
   */
  async recordEvents(events: EventDoc[]): Promise<void> {
    if (!this.opts.enabled) return;
    const entries = events.map((e) => entryOfEvent(e, this.redactor, this.ignored)).filter((x) => x !== null);
    if (!entries.length) return;
    try {
      await traced('audit.flush', () => this.opts.observeFlush(entries.length, () => this.insert(entries)), { attributes: { 'audit.entries': entries.length } });
    } catch (err) {
      if (this.opts.retryWhen?.(err)) throw err;
      this.log.error({ err, lost: entries.length, entries: entries.map((e) => ({ resource: e.resource, item_id: String(e.item_id), operation: e.operation })) }, 'audit entries could not be written');
    }
  }

  private async insert(batch: AuditEntryInput[]): Promise<void> {
    try {
      await this.model.insertMany(batch, { ordered: false, lean: true });
    } catch (err) {
      // Entries written by an earlier attempt (a retried batch, a second sweep) are duplicates, not failures.
      if (!onlyDuplicateIds(err)) throw err;
    }
  }

  async flush(): Promise<void> {
    await this.opts.flushEvents?.();
  }

  async scrubSubject(input: ScrubInput): Promise<{ scrubbed: number }> {
    // Runs whether or not recording is enabled: entries written earlier still hold the data.
    await this.flush();
    return scrubEntries(this.model, input);
  }

  // --- reading (each read flushes first, so a process reads its own writes) ----------------

  /** `GET /admin/audit-log`: filtered, sorted (`_id` breaks ties), one page, with the total. */
  async list(actor: Actor, q: ListQuery): Promise<AuditPage> {
    const filter = this.filterOf(actor, q);
    await this.flush();
    const [items, total] = await Promise.all([
      this.model
        .find(filter)
        .sort(sortOf(q.sort))
        .skip((q.page - 1) * q.per_page)
        .limit(q.per_page)
        .lean<AuditEntryRecord[]>(),
      this.model.countDocuments(filter),
    ]);
    return pageOf(items.map(entryView), total, q);
  }

  /** `GET /admin/audit-log/stats`: counts by operation, resource, user and period, in one aggregation. */
  async stats(actor: Actor, q: StatsQuery): Promise<AuditStats> {
    const filter = this.filterOf(actor, q);
    await this.flush();
    type Count<K> = { _id: K; count: number };
    const [res] = await this.model.aggregate<{
      total: { n: number }[];
      by_operation: Count<string>[];
      by_resource: Count<string>[];
      by_user: (Count<Types.ObjectId | null> & { user_name: string | null })[];
      timeline: Count<string>[];
    }>([
      { $match: filter },
      {
        $facet: {
          total: [{ $count: 'n' }],
          by_operation: [{ $group: { _id: '$operation', count: { $sum: 1 } } }],
          by_resource: [{ $group: { _id: '$resource', count: { $sum: 1 } } }],
          by_user: [
            // The most recent display name of each user.
            { $group: { _id: '$user_id', user_name: { $top: { sortBy: { created_at: -1 }, output: '$user_name' } }, count: { $sum: 1 } } },
            { $sort: { count: -1, _id: 1 } },
          ],
          timeline: [
            { $group: { _id: { $dateToString: { format: PERIOD_FORMAT[q.group_by], date: '$created_at', timezone: 'UTC' } }, count: { $sum: 1 } } },
            { $sort: { _id: 1 } },
          ],
        },
      },
    ]);
    const toMap = (rows: Count<string>[] = []) => Object.fromEntries(rows.map((r) => [r._id, r.count]));
    return {
      total_entries: res?.total[0]?.n ?? 0,
      by_operation: toMap(res?.by_operation),
      by_resource: toMap(res?.by_resource),
      by_user: (res?.by_user ?? []).map((r) => ({ user_id: r._id ? String(r._id) : null, user_name: r.user_name ?? null, count: r.count })),
      timeline: (res?.timeline ?? []).map((r) => ({ period: r._id, count: r.count })),
    };
  }

  /**
   * `GET /admin/audit-log/export`: newest first, at most `limit` entries, streamed from a database
   * cursor so memory does not grow with the row count. CSV uses CRLF records, RFC 4180 quoting
   * and a `'` before cells that a spreadsheet would run as a formula.
   */
  async export(actor: Actor, q: ExportQuery): Promise<AuditExport> {
    const filter = this.filterOf(actor, q);
    await this.flush();
    const cursor = this.model.find(filter).sort(sortOf(DEFAULT_SORT)).limit(q.limit).lean<AuditEntryRecord[]>().cursor({ batchSize: 1000 });
    const stamp = new Date().toISOString().replace(/\.\d+Z$/, 'Z').replace(/:/g, '-');
    if (q.format === 'json') {
      return { stream: Readable.from(jsonArray(cursor)), contentType: 'application/json; charset=utf-8', filename: `audit-log-${stamp}.json` };
    }
    // Setting `record_delimiter` turns off quoting of a lone CR or LF unless `quote_record_delimiter` says otherwise.
    const csv = stringify({ header: true, columns: [...CSV_COLUMNS], record_delimiter: 'windows', quote_record_delimiter: true, escape_formulas: true });
    const stream = pipeline(Readable.from(mapped(cursor, csvRow)), csv, (err) => {
      if (err && err.code !== 'ERR_STREAM_PREMATURE_CLOSE') this.log.error({ err }, 'audit export failed');
    });
    return { stream, contentType: 'text/csv; charset=utf-8', filename: `audit-log-${stamp}.csv` };
  }

  /**
   * Deletes entries older than `days` days in the actor's scope (retention endpoint and the
   * `cleanup_audit_log` job): `systemActor()` or a system administrator without `X-Tenant-Id`
   * purges every tenant (entries without a tenant included), `systemActor(tenantId)` or
   * `X-Tenant-Id` only that tenant. Retention is an operator's decision: the retention route
   * declares {@link AUDIT_PERMISSIONS}`.purge`, and the service refuses any other actor itself too,
   * since jobs and other plugins (`services.get('audit')`) call it with actors no route checked.
   *
   * @example await audit.purge(ctx.actor, 365)   // in a job: per-tenant runs purge their tenant only
   * @throws AccessDeniedError for a non-system actor (nothing deleted)
   */
  async purge(actor: Actor, days: number): Promise<{ deleted_count: number; cutoff_date: Date }> {
    requireRole(actor, 'system');
    const scope = this.opts.tenancy.filter(actor);
    await this.flush();
    const cutoff = new Date(Date.now() - days * DAY_MS);
    const res = await this.model.deleteMany({ ...scope, created_at: { $lt: cutoff } });
    return { deleted_count: res.deletedCount, cutoff_date: cutoff };
  }

  /**
   * System actors see every tenant; other administrators only the entries of
   * their own tenant, unless `MULTI_TENANT_ENABLED` is false. A system actor acting in one tenant
   * (`X-Tenant-Id`, `systemActor(tenantId)`) sees that tenant only. Also the filter of live entries.
   */
  filterOf(actor: Actor, f: AuditFilter): Filter {
    const filter: Filter = this.opts.tenancy.filter(actor);
    if (f.resource !== undefined) filter.resource = f.resource;
    if (f.resource_id !== undefined) filter.item_id = new Types.ObjectId(f.resource_id);
    if (f.user_id !== undefined) filter.user_id = new Types.ObjectId(f.user_id);
    if (f.operation !== undefined) filter.operation = f.operation;
    if (f.date_from || f.date_to) filter.created_at = { ...(f.date_from ? { $gte: f.date_from } : {}), ...(f.date_to ? { $lte: f.date_to } : {}) };
    return filter;
  }
}
