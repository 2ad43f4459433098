import type { Types } from 'mongoose';
import { hasSystemScope, type Actor } from '../../core/context.ts';
import type { JobChainRecord, JobRunRecord, JobScheduleRecord, RunStatus } from './model.ts';

const REDACTED = '[redacted]';
const SECRET_PATTERNS: [RegExp, string][] = [
  // A URL carrying credentials (mongodb://user:pass@host/db, https://user:token@host): all but its scheme.
  [/\b([a-z][a-z0-9+.-]*:\/\/)[^\s/@]*@[^\s'",;)]*/gi, `$1${REDACTED}`],
  // Authorization header values.
  [/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+/g, `$1 ${REDACTED}`],
  // name=value / name: value where the name says secret (password=, api_key=, "secret": "...").
  [/\b([A-Za-z0-9_-]*(?:key|secret|password|passwd|pwd|token|credential)s?)(["']?\s*[:=]\s*)("[^"]*"|'[^']*'|[^\s,;&"'})]+)/gi, `$1$2${REDACTED}`],
  // JSON Web Tokens and this server's API keys standing alone.
  [/\beyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*/g, REDACTED],
  [/\bak_[A-Za-z0-9_-]{8,}/g, REDACTED],
];

/** `text` with credentials, tokens and `key=` / `secret=` / `password=` values replaced by `[redacted]`. */
export function redactSecrets(text: string): string {
  return SECRET_PATTERNS.reduce((s, [re, to]) => s.replace(re, to), text);
}

/**
 * The one decision on what an actor sees of a run's failure (REST, the SSE stream and GraphQL
 * all use it): system-scoped actors get the error and its traceback as stored; everybody else the
 * error message only, secrets redacted (a handler's message may quote a connection string; the
 * traceback names server files).
 */
export function failureView(actor: Actor, r: Pick<JobRunRecord, 'error' | 'error_traceback'>): { error: string | null; error_traceback: string | null } {
  return failureFor(hasSystemScope(actor), r);
}

function failureFor(system: boolean, r: Pick<JobRunRecord, 'error' | 'error_traceback'>): { error: string | null; error_traceback: string | null } {
  if (system) return { error: r.error ?? null, error_traceback: r.error_traceback ?? null };
  return { error: r.error ? redactSecrets(r.error) : null, error_traceback: null };
}

type LogLineRecord = { timestamp: Date; level: string; message: string; percentage?: number | null | undefined };

/** A log line as shown to `actor`: its message redacted like the error for actors without system scope. */
export function logLineView(actor: Actor, l: LogLineRecord) {
  return lineFor(hasSystemScope(actor), l);
}

const lineFor = (system: boolean, l: LogLineRecord) => ({ timestamp: l.timestamp, level: l.level, message: system ? l.message : redactSecrets(l.message), percentage: l.percentage ?? null });

const iso = (d: Date | null | undefined) => d ?? null;
const str = (id: Types.ObjectId | null | undefined) => (id ? String(id) : null);

/** Public shape of a run as `actor` sees it (`failureView`). `logs` only where asked for (one run), not in lists. */
export function runView(actor: Actor, r: JobRunRecord, withLogs = true) {
  return runFor(hasSystemScope(actor), r, withLogs);
}

/**
 * A finished run as its `job_run.completed` / `job_run.failed` event carries it: the list form (no
 * logs), the failure as a tenant administrator sees it (secrets redacted, no traceback), because
 * tenant administrators read their tenant's event log.
 */
export const runEventData = (r: JobRunRecord) => runFor(false, r, false);

function runFor(system: boolean, r: JobRunRecord, withLogs: boolean) {
  const total = r.progress_total ?? null;
  return {
    id: String(r._id),
    job_name: r.job_name,
    job_type: r.job_type,
    status: r.status as RunStatus,
    started_at: iso(r.started_at),
    completed_at: iso(r.completed_at),
    duration_ms: r.duration_ms ?? null,
    duration_seconds: r.duration_seconds ?? null,
    parameters: (r.parameters ?? {}) as Record<string, unknown>,
    result: r.result ?? null,
    ...failureFor(system, r),
    progress_current: r.progress_current ?? 0,
    progress_total: total,
    progress_message: r.progress_message ?? null,
    percentage: total ? Math.min(100, Math.round(((r.progress_current ?? 0) / total) * 100)) : null,
    parent_job_id: str(r.parent_job_id),
    chain_index: r.chain_index ?? null,
    attempt: r.attempt,
    max_attempts: r.max_attempts,
    triggered_by: r.triggered_by ?? null,
    trigger: r.trigger,
    triggered_by_user: r.triggered_by_user ?? null,
    tenant_id: str(r.tenant_id),
    chain_id: str(r.chain_id),
    chain_run_id: str(r.chain_run_id),
    schedule_id: str(r.schedule_id),
    timeout_seconds: r.timeout_seconds,
    created_at: r.created_at,
    updated_at: r.updated_at,
    ...(withLogs ? { logs: (r.logs ?? []).map((l) => lineFor(system, l)) } : {}),
  };
}
export type RunView = ReturnType<typeof runView>;

/** Public shape of a schedule: the primary fields and, beside them, the extended names for the same values. */
export function scheduleView(s: JobScheduleRecord) {
  const target = s.type === 'chain' ? str(s.chain_id) : (s.job_type ?? null);
  return {
    id: String(s._id),
    job_name: s.job_name,
    name: s.job_name,
    description: s.description ?? null,
    cron_expression: s.cron_expression,
    cron: s.cron_expression,
    timezone: s.timezone,
    is_enabled: s.is_enabled,
    type: s.type as 'job' | 'chain',
    job_type: s.job_type ?? null,
    target,
    parameters: (s.parameters ?? {}) as Record<string, unknown>,
    params: (s.parameters ?? {}) as Record<string, unknown>,
    allow_param_override: s.allow_param_override,
    max_attempts: s.max_attempts ?? null,
    timeout_seconds: s.timeout_seconds ?? null,
    chain: [...(s.chain ?? [])],
    depends_on_schedules: (s.depends_on_schedules ?? []).map(String),
    dependency_mode: s.dependency_mode,
    tenant_id: str(s.tenant_id),
    per_tenant: s.per_tenant,
    last_run_id: str(s.last_run_id),
    last_run_at: iso(s.last_run_at),
    last_run_status: s.last_run_status ?? null,
    next_run_at: iso(s.next_run_at),
    dependency_unmet: s.dependency_unmet,
    skipped_at: iso(s.skipped_at),
    created_at: s.created_at,
    updated_at: s.updated_at,
  };
}
export type ScheduleView = ReturnType<typeof scheduleView>;

export function chainView(c: JobChainRecord) {
  return {
    id: String(c._id),
    name: c.name,
    description: c.description ?? '',
    is_system: c.is_system,
    default_on_failure: c.default_on_failure,
    steps: (c.steps ?? []).map((s) => ({
      job: s.job, params: (s.params ?? {}) as Record<string, unknown>, depends_on: [...(s.depends_on ?? [])],
      on_failure: s.on_failure ?? null, retries: s.retries, retry_delay_seconds: s.retry_delay_seconds,
    })),
    created_at: c.created_at,
    updated_at: c.updated_at,
  };
}
export type ChainView = ReturnType<typeof chainView>;
