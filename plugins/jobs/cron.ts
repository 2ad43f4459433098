import { CronExpressionParser } from 'cron-parser';

/**
 * Parse a cron expression: five fields (minute hour day month weekday), or six with leading
 * seconds. Returns the parser's reason when it is invalid.
 */
export function checkCron(expr: string, timezone: string): string | null {
  const fields = expr.trim().split(/\s+/);
  if (fields.length !== 5 && fields.length !== 6) return `expected 5 fields (minute hour day month weekday), or 6 with leading seconds; got ${fields.length}`;
  try {
    CronExpressionParser.parse(expr, { tz: timezone, strict: false });
    return null;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

/** The first occurrence strictly after `after`. */
export function nextOccurrence(expr: string, timezone: string, after: Date = new Date()): Date {
  return CronExpressionParser.parse(expr, { tz: timezone, currentDate: after }).next().toDate();
}

/** The latest occurrence at or before `at`. */
export function previousOccurrence(expr: string, timezone: string, at: Date): Date {
  return CronExpressionParser.parse(expr, { tz: timezone, currentDate: new Date(at.getTime() + 1) }).prev().toDate();
}

/**
 * The smallest gap, in seconds, between consecutive fire times among the next `count`
 * occurrences after `after`: how often the expression fires at its most frequent.
 */
export function smallestGapSeconds(expr: string, timezone: string, count = 20, after: Date = new Date()): number {
  const it = CronExpressionParser.parse(expr, { tz: timezone, currentDate: after });
  let gap = Infinity;
  let prev: number | undefined;
  for (let i = 0; i < count && it.hasNext(); i++) {
    const at = it.next().toDate().getTime();
    if (prev !== undefined) gap = Math.min(gap, (at - prev) / 1000);
    prev = at;
  }
  return gap;
}

export const isTimeZone = (tz: string): boolean => {
  try {
    new Intl.DateTimeFormat('en', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
};

/** Calendar date (y, m 1-12, d) of `at` in `timezone`. */
function localDate(at: Date, timezone: string): { y: number; m: number; d: number } {
  const parts = new Intl.DateTimeFormat('en-CA', { timeZone: timezone, year: 'numeric', month: '2-digit', day: '2-digit' }).formatToParts(at);
  const get = (t: string) => Number(parts.find((p) => p.type === t)!.value);
  return { y: get('year'), m: get('month'), d: get('day') };
}

const pad = (n: number) => String(n).padStart(2, '0');
const ymd = (t: Date) => `${t.getUTCFullYear()}-${pad(t.getUTCMonth() + 1)}-${pad(t.getUTCDate())}`;

/** The day (YYYY-MM-DD) of `at` in `timezone`: what `same_day` dependencies compare. */
export function localDay(at: Date, timezone: string): string {
  const { y, m, d } = localDate(at, timezone);
  return `${y}-${pad(m)}-${pad(d)}`;
}

/** Values of the schedule parameter placeholders for a run due at `at`, in `timezone`. */
export function templateValues(at: Date, timezone: string): Record<string, string> {
  const { y, m, d } = localDate(at, timezone);
  const today = new Date(Date.UTC(y, m - 1, d));
  const yesterday = new Date(Date.UTC(y, m - 1, d - 1));
  const prevMonth = new Date(Date.UTC(y, m - 2, 1));
  return {
    today: ymd(today),
    yesterday: ymd(yesterday),
    month: `${y}-${pad(m)}`,
    previous_month: `${prevMonth.getUTCFullYear()}-${pad(prevMonth.getUTCMonth() + 1)}`,
  };
}

/** Replace `{today}`, `{yesterday}`, `{month}`, `{previous_month}` in every string of `value`, at any depth. */
export function resolveTemplates(value: unknown, values: Record<string, string>): unknown {
  if (typeof value === 'string') return value.replace(/\{(today|yesterday|month|previous_month)\}/g, (_, k: string) => values[k]!);
  if (Array.isArray(value)) return value.map((v) => resolveTemplates(v, values));
  if (value && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype)
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolveTemplates(v, values)]));
  return value;
}
