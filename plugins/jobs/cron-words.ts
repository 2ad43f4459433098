/**
 * A cron expression in words ("At 02:30, Monday to Friday (Europe/Paris)") and its next fire
 * times: what a schedule editor shows next to the expression. No Koa or GraphQL here.
 */
import { CronExpressionParser } from 'cron-parser';
import { checkCron } from './cron.ts';

const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday', 'Sunday'];
const MONTHS = ['', 'January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
const MONTH_NAMES = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const DAY_NAMES = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];

const pad = (v: string) => v.padStart(2, '0');
const isNum = (v: string) => /^\d+$/.test(v);

/** One field's list ("1,3", "1-5", "mon-fri") in words, with `name` mapping a value to its word. */
function list(field: string, name: (v: string) => string): string {
  return field
    .split(',')
    .map((part) => {
      const [range, step] = part.split('/');
      const [a, b] = (range ?? '').split('-');
      const base = range === '*' ? 'every' : b !== undefined ? `${name(a!)} to ${name(b)}` : name(a!);
      return step ? `every ${step}${range === '*' ? '' : ` from ${base}`}` : base;
    })
    .join(', ');
}

const dayName = (v: string) => {
  const i = isNum(v) ? Number(v) : DAY_NAMES.indexOf(v.toLowerCase().slice(0, 3));
  return DAYS[i] ?? v;
};
const monthName = (v: string) => {
  const i = isNum(v) ? Number(v) : MONTH_NAMES.indexOf(v.toLowerCase().slice(0, 3)) + 1;
  return MONTHS[i] ?? v;
};

/** Describes a valid expression (five fields, or six with leading seconds) in English. */
export function describeCron(expr: string, timezone: string): string {
  const fields = expr.trim().split(/\s+/);
  const [sec, min, hour, dom, mon, dow] = fields.length === 6 ? fields : ['0', ...fields];
  let time: string;
  if (isNum(min!) && isNum(hour!)) time = `At ${pad(hour!)}:${pad(min!)}${sec !== '0' ? `:${pad(sec!)}` : ''}`;
  else if (min === '*' && hour === '*') time = 'Every minute';
  else if (/^\*\/\d+$/.test(min!) && hour === '*') time = `Every ${min!.slice(2)} minutes`;
  else if (isNum(min!) && hour === '*') time = `At minute ${min} of every hour`;
  else if (isNum(min!) && /^\*\/\d+$/.test(hour!)) time = `At minute ${min} of every ${hour!.slice(2)} hours`;
  else time = `At minute ${list(min!, String)} of hour ${list(hour!, String)}`;
  if (sec !== '0' && !(isNum(min!) && isNum(hour!))) time += ` (second ${list(sec!, String)})`;
  const parts = [time];
  if (dom !== '*' && dom !== '?') parts.push(`on day ${list(dom!, String)} of the month`);
  if (dow !== '*' && dow !== '?') parts.push(dom !== '*' && dom !== '?' ? `or on ${list(dow!, dayName)}` : `on ${list(dow!, dayName)}`);
  if (dom === '*' && dow === '*') parts.push('every day');
  if (mon !== '*') parts.push(`in ${list(mon!, monthName)}`);
  return `${parts.join(', ')} (${timezone})`;
}

/** The next `count` fire times after `after`. */
export function nextFireTimes(expr: string, timezone: string, count: number, after: Date = new Date()): Date[] {
  const it = CronExpressionParser.parse(expr, { tz: timezone, currentDate: after });
  const out: Date[] = [];
  while (out.length < count && it.hasNext()) out.push(it.next().toDate());
  return out;
}

export interface CronPreview {
  expression: string;
  timezone: string;
  valid: boolean;
  error: string | null;
  description: string | null;
  next: Date[];
}

/** What the schedule editor shows: whether the expression is valid (and why not), its words, its next fire times. */
export function previewCron(expression: string, timezone: string, count: number): CronPreview {
  const error = checkCron(expression, timezone);
  if (error) return { expression, timezone, valid: false, error, description: null, next: [] };
  return { expression, timezone, valid: true, error: null, description: describeCron(expression, timezone), next: nextFireTimes(expression, timezone, count) };
}
