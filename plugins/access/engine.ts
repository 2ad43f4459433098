/**
 * Combining roles into the effective rule of one (actor, resource, action): which roles apply,
 * their grants with the actor's variables resolved, and the database filter of the rows they
 * grant. No Koa or GraphQL here.
 */
import type { Actor } from '../../core/context.ts';
import { BUILTIN_ROLES, normalize, VARIABLE, type Action, type CodeAccess, type CompiledRule, type Rule } from './rules.ts';

type Filter = Record<string, unknown>;

/** One role of a tenant as the engine reads it: its includes and its compiled rules per resource. */
export interface RoleRules {
  name: string;
  includes: string[];
  rules: Map<string, Partial<Record<Action, CompiledRule>>>;
}

/** What the engine needs to know of a resource. */
export interface ResourceFacts {
  name: string;
  /** Client fields a rule may name (top-level, not private). */
  fields: readonly string[];
  /** Rules declared in code (`defineResource({ access })`). */
  code: CodeAccess | undefined;
  /** The resource's `where` compiler (throws a 400 for anything outside the language). */
  compile(where: Filter): Filter;
}

/** A rule of one role, resolved for one actor: the unit the semantics combine. */
export interface Grant {
  role: string;
  /** null: every row. */
  rows: Filter | null;
  /** null: every field. */
  fields: Set<string> | null;
  presets: Filter;
  check: Filter | null;
}

/** The effective rule: `null` grants mean the resource has no rules for the caller (access as it always was). */
export interface Effective {
  /** The caller's roles, `includes` expanded. */
  roles: string[];
  /** null: unrestricted; [] denied; otherwise the grants, any one of which allows. */
  grants: Grant[] | null;
  /**
   * Whether the grants follow from the actor and the roles alone: no rule applied was a function of
   * the actor (code rules may be) or used `$now`. Only such a result may be reused for the same
   * actor and roles.
   */
  stable: boolean;
}

/** The caller's roles with every included role, each once (a cycle stored anyway stops there). */
export function expandRoles(names: readonly string[], roles: ReadonlyMap<string, RoleRules>): string[] {
  const out: string[] = [];
  const visit = (n: string) => {
    if (out.includes(n)) return;
    out.push(n);
    for (const i of roles.get(n)?.includes ?? []) visit(i);
  };
  for (const n of names) visit(n);
  return out;
}

/** The role names an `includes` list reaches from `start`, to refuse a cycle before it is stored. */
export function reaches(start: string, includes: readonly string[], roles: ReadonlyMap<string, Pick<RoleRules, 'includes'>>): boolean {
  const seen = new Set<string>();
  const stack = [...includes];
  while (stack.length) {
    const n = stack.pop()!;
    if (n === start) return true;
    if (seen.has(n)) continue;
    seen.add(n);
    stack.push(...(roles.get(n)?.includes ?? []));
  }
  return false;
}

const compiledCode = new WeakMap<object, CompiledRule>();
const timed = new WeakMap<CompiledRule, boolean>();

/** Whether a compiled rule names `$now` (its grants change with the clock). */
function usesNow(c: CompiledRule): boolean {
  let t = timed.get(c);
  if (t === undefined) timed.set(c, (t = JSON.stringify([c.rows, c.presets, c.check]).includes('"$now"')));
  return t;
}

function codeRule(rule: unknown, actor: Actor, facts: ResourceFacts): CompiledRule | null {
  if (typeof rule === 'function') {
    const r = (rule as (a: Actor) => Rule | false | null | undefined)(actor);
    return r ? normalize(r, facts.compile) : null;
  }
  if (rule === true) return normalize(true, facts.compile);
  if (!rule || typeof rule !== 'object') return null;
  let c = compiledCode.get(rule);
  if (!c) compiledCode.set(rule, (c = normalize(rule as Rule, facts.compile)));
  return c;
}

const scalar = (x: unknown) => x === null || ['string', 'number', 'boolean'].includes(typeof x);

/** An attribute as a rule sees it: scalars and lists of scalars only (an object attribute is null). */
const attributeValue = (v: unknown): unknown => (Array.isArray(v) ? v.filter(scalar) : v !== undefined && scalar(v) ? v : null);

/** The value of a variable for an actor. */
function variable(name: string, actor: Actor, now: Date): unknown {
  if (name === '$now') return now;
  if (name === '$actor.id') return actor.id;
  if (name === '$actor.tenant_id') return actor.tenant_id;
  return attributeValue(actor.attributes[name.slice('$actor.attributes.'.length)]);
}

/**
 * Everything of an actor that stable grants (see `Effective.stable`) are made of, as a string: two
 * actors with the same key get the same grants from the same roles. Attributes as a rule sees them,
 * numbers JSON cannot tell apart (NaN, Infinity) as objects, which no attribute is
 * as a rule sees it.
 */
export function actorKey(actor: Actor, systemScope: boolean): string {
  const attributes = Object.keys(actor.attributes).sort().map((k) => [k, attributeValue(actor.attributes[k])]);
  return JSON.stringify([actor.id, actor.tenant_id, actor.roles, systemScope, attributes], (_k, v: unknown) =>
    typeof v === 'number' && !Number.isFinite(v) ? { nonFinite: String(v) } : v);
}

/** A filter or presets with every variable replaced by the actor's value; a list variable inside a list is spread. */
export function resolve<T>(value: T, actor: Actor, now: Date): T {
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string' && VARIABLE.test(v)) return variable(v, actor, now);
    if (Array.isArray(v)) return v.flatMap((x) => (typeof x === 'string' && VARIABLE.test(x) ? [variable(x, actor, now)].flat() : [walk(x)]));
    if (v && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
    return v;
  };
  return walk(value) as T;
}

/** `{$in: "$actor.attributes.x"}` as the list the language requires, before the resource compiles it. */
export function listVariables(where: Filter): Filter {
  const walk = (v: unknown, key?: string): unknown => {
    if (typeof v === 'string' && VARIABLE.test(v) && (key === '$in' || key === '$nin' || key === '$all')) return [v];
    if (Array.isArray(v)) return v.map((x) => walk(x));
    if (v && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x, k)]));
    return v;
  };
  return walk(where) as Filter;
}

const fieldSet = (f: CompiledRule['fields'], all: readonly string[]): Set<string> | null => {
  if (!f) return null;
  if ('only' in f) return new Set(f.only);
  const except = new Set(f.except);
  return new Set(all.filter((x) => !except.has(x)));
};

/**
 * The effective rule of `actor` for `action` on a resource. A resource none of the caller's roles
 * has rules for, and a built-in role without rules for it, keep the access they always had; a
 * custom role grants only what its rules say. System administrators are never restricted.
 */
export function effective(actor: Actor, action: Action, facts: ResourceFacts, roles: ReadonlyMap<string, RoleRules>, systemScope: boolean): Effective {
  const names = expandRoles(actor.roles, roles);
  if (systemScope) return { roles: names, grants: null, stable: true };
  const ruled = (n: string) => !!facts.code?.[n] || !!roles.get(n)?.rules.has(facts.name);
  if (!names.some(ruled)) return { roles: names, grants: null, stable: true };
  if (names.some((n) => BUILTIN_ROLES.includes(n) && !ruled(n))) return { roles: names, grants: null, stable: true };
  const now = new Date();
  const grants: Grant[] = [];
  let stable = true;
  for (const n of names) {
    const found: CompiledRule[] = [];
    const code = facts.code?.[n]?.[action];
    if (code !== undefined) {
      if (typeof code === 'function') stable = false;
      const c = codeRule(code, actor, facts);
      if (c) found.push(c);
    }
    const stored = roles.get(n)?.rules.get(facts.name)?.[action];
    if (stored) found.push(stored);
    for (const c of found) {
      if (usesNow(c)) stable = false;
      grants.push({
        role: n,
        rows: c.rows ? resolve(c.rows, actor, now) : null,
        fields: fieldSet(c.fields, facts.fields),
        presets: resolve(c.presets, actor, now),
        check: c.check ? resolve(c.check, actor, now) : null,
      });
    }
  }
  return { roles: names, grants, stable };
}

/** The filter of the rows any grant allows: null when one allows every row. */
export function rowsFilter(grants: readonly Grant[]): Filter | null {
  if (grants.some((g) => !g.rows)) return null;
  return grants.length === 1 ? grants[0]!.rows : { $or: grants.map((g) => g.rows!) };
}
