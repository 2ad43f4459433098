/**
 * The `access` service: the effective rule of an actor for a resource and an action, from the
 * tenant's stored roles (cached per tenant for `AUTH_CACHE_TTL_MS`) and the rules resources declare
 * in code, in the forms the resources plugin applies: a rows filter for the query, a field mask
 * per row, and the decision on a write. No Koa or GraphQL here.
 */
import { AccessDeniedError, NotFoundError } from '../../core/errors.ts';
import { hasSystemScope, type Actor } from '../../core/context.ts';
import type { Doc } from '../../core/hooks.ts';
import { actorKey, effective, listVariables, rowsFilter, type Effective, type Grant, type ResourceFacts, type RoleRules } from './engine.ts';
import { fieldsOf, matches } from './match.ts';
import { BUILTIN_ROLES, normalize, ruleSchema, type Action, type CodeAccess, type Permissions } from './rules.ts';
import type { ExplainView } from './schemas.ts';

type Filter = Record<string, unknown>;

/** What the service needs of a resource (the resources plugin provides it). */
export interface ResourceAccessSource {
  name: string;
  /** Client fields (top-level, not private). */
  fields: readonly string[];
  /** `_id` and the base fields: readable wherever the row is. */
  system: readonly string[];
  code: CodeAccess | undefined;
  compile(where: Filter): Filter;
}

/** How a read is restricted for one caller; null from {@link AccessService.read} when it is not. */
export interface ReadAccess {
  /** The filter of the readable rows, to AND after the tenant scope and soft delete; null: every row. */
  rows: Filter | null;
  /** Fields readable in some readable row (null: every field). */
  readable: ReadonlySet<string> | null;
  /** Fields readable in every readable row: the only ones a filter, sort or search may name (null: every field). */
  queryable: ReadonlySet<string> | null;
  /** Fields the mask reads to decide per row (project them with a `fields` list). */
  maskNeeds: ReadonlySet<string>;
  /** The row without the fields the caller may not read in it. */
  mask(doc: Doc): Doc;
  /** Whether the caller may read this row at all (a document held in memory: a write's result, an event's data). */
  sees(doc: Doc): boolean;
}

/** A write as the resources plugin presents it for a decision. */
export interface WriteRequest {
  /** The stored document (null for a create). */
  old: Doc | null;
  /** The fields the write names (a replace: also those it clears). */
  written: readonly string[];
  /** The body as the client sent it (presets it names must equal the preset). */
  input: Doc;
  /** The document the write would produce with these presets applied. */
  result(presets: Doc): Doc;
}

/** How a write is restricted for one caller. */
export interface WriteAccess {
  /** Rows this write may touch, to AND into the query (404 outside them); null: every row. */
  rows: Filter | null;
  /**
   * The presets to apply when one grant allows the whole write.
   * @throws AccessDeniedError (403) naming the first field no grant lets the caller write, or with `details.reason: "check"`
   */
  decide(w: WriteRequest): Doc;
}

interface TenantRoles {
  at: number;
  roles: Map<string, RoleRules>;
}

export interface AccessDeps {
  /** The resource's facts, or undefined for an unknown resource. */
  resource(name: string): ResourceAccessSource | undefined;
  /** The stored roles of a tenant (live ones). */
  loadRoles(tenantId: string): Promise<{ name: string; includes: string[]; permissions: Permissions }[]>;
  ttlMs: number;
}

const factsOf = new WeakMap<ResourceAccessSource, ResourceFacts>();
const asFacts = (r: ResourceAccessSource): ResourceFacts => {
  let f = factsOf.get(r);
  if (!f) factsOf.set(r, (f = { name: r.name, fields: r.fields, code: r.code, compile: (w) => r.compile(listVariables(w)) }));
  return f;
};

/** Checks a code rule's shape once, so a mistake in `defineResource({ access })` fails at start-up. */
export function checkCodeAccess(name: string, access: CodeAccess): void {
  for (const [role, rules] of Object.entries(access)) {
    for (const [action, rule] of Object.entries(rules)) {
      if (typeof rule === 'function') continue;
      const r = ruleSchema.safeParse(rule);
      if (!r.success) throw new Error(`Resource "${name}": access rule ${role}.${action} is not a rule: ${r.error.message}`);
    }
  }
}

/** A restriction as built for one (actor, resource, action) from one roles map, or its refusal. */
type Built = { value: ReadAccess | WriteAccess | null } | { denied: true };

/** Restrictions kept per roles map; the memo of a map is emptied when it reaches this many. */
const BUILT_MAX = 10_000;

export class AccessService {
  private readonly cache = new Map<string, TenantRoles>();
  /**
   * Restrictions built from a tenant's cached roles, per roles map: a reload (TTL) or an
   * invalidation replaces the map, and with it the memo. Keyed by everything the grants are made of
   * (the actor's id, tenant, roles, attributes and scope, the resource, the action); only stable
   * grants are kept (see `Effective.stable`).
   */
  private readonly built = new WeakMap<ReadonlyMap<string, RoleRules>, Map<string, Built>>();

  constructor(private readonly deps: AccessDeps) {}

  /** Forget a tenant's roles in this process (others reload within the TTL). */
  invalidate(tenantId: string): void {
    this.cache.delete(tenantId);
  }

  /** The roles of a tenant, compiled; cached for the TTL. */
  async roles(tenantId: string): Promise<Map<string, RoleRules>> {
    const hit = this.cache.get(tenantId);
    if (hit && Date.now() - hit.at < this.deps.ttlMs) return hit.roles;
    const stored = await this.deps.loadRoles(tenantId);
    const roles = new Map<string, RoleRules>();
    for (const r of stored) {
      const rules: RoleRules['rules'] = new Map();
      for (const [resource, byAction] of Object.entries(r.permissions)) {
        const facts = this.deps.resource(resource);
        if (!facts) continue; // a resource no longer registered grants nothing
        const f = asFacts(facts);
        rules.set(resource, Object.fromEntries(Object.entries(byAction).map(([a, rule]) => [a, normalize(rule, f.compile)])));
      }
      roles.set(r.name, { name: r.name, includes: r.includes, rules });
    }
    if (this.deps.ttlMs > 0) this.cache.set(tenantId, { at: Date.now(), roles });
    return roles;
  }

  /** The effective rule of `actor` for `action` on `resource`. */
  async effective(actor: Actor, resource: string, action: Action): Promise<Effective> {
    return (await this.resolve(actor, resource, action)).eff;
  }

  /** The effective rule, and the roles map it came from when that is the tenant's cached one. */
  private async resolve(actor: Actor, resource: string, action: Action): Promise<{ eff: Effective; cached: ReadonlyMap<string, RoleRules> | null }> {
    const src = this.deps.resource(resource);
    if (!src) throw new NotFoundError('resource', resource);
    const system = hasSystemScope(actor);
    if (system || (!src.code && actor.roles.every((r) => r === 'user' || r === 'admin'))) {
      return { eff: effective(actor, action, asFacts(src), new Map<string, RoleRules>(), system), cached: null };
    }
    const roles = await this.roles(actor.tenant_id);
    return { eff: effective(actor, action, asFacts(src), roles, system), cached: this.cache.get(actor.tenant_id)?.roles === roles ? roles : null };
  }

  /**
   * The restriction `build` makes of the caller's grants (null: none applies), reused while the
   * tenant's cached roles stay the same and the grants are stable.
   * @throws AccessDeniedError when no role allows `action`
   */
  private async restriction<T extends ReadAccess | WriteAccess>(actor: Actor, resource: string, action: Action, build: (grants: Grant[]) => T): Promise<T | null> {
    const src = this.deps.resource(resource);
    // Known from the role names alone (built-in roles, system scope): no grant to resolve or remember.
    if (src && !restrictable(src, actor)) return null;
    const roles = src && !hasSystemScope(actor) ? this.cache.get(actor.tenant_id) : undefined;
    const memo = roles && Date.now() - roles.at < this.deps.ttlMs ? this.built.get(roles.roles) : undefined;
    const key = `${resource}:${action}:${actorKey(actor, hasSystemScope(actor))}`;
    const hit = memo?.get(key);
    if (hit) {
      if ('denied' in hit) denyEmpty([], resource, action);
      return (hit as { value: T | null }).value;
    }
    const { eff, cached } = await this.resolve(actor, resource, action);
    let built: Built;
    try {
      built = { value: eff.grants ? build(denyEmpty(eff.grants, resource, action)) : null };
    } catch (err) {
      if (!(err instanceof AccessDeniedError)) throw err;
      built = { denied: true };
      if (cached && eff.stable) this.remember(cached, key, built);
      throw err;
    }
    if (cached && eff.stable) this.remember(cached, key, built);
    return built.value as T | null;
  }

  private remember(roles: ReadonlyMap<string, RoleRules>, key: string, built: Built): void {
    let memo = this.built.get(roles);
    if (!memo) this.built.set(roles, (memo = new Map()));
    if (memo.size >= BUILT_MAX) memo.clear();
    memo.set(key, built);
  }

  /**
   * Whether rules may restrict `actor`'s reads of `resource`, decided without the stored roles:
   * false exactly where {@link effective} applies no rule for a reason known from the role names
   * (system scope, no role with rules, a built-in role without rules); every custom role counts as
   * having rules. Realtime delivery withholds the resource's events when true.
   */
  eventRestricted(actor: Actor, resource: string): boolean {
    const src = this.deps.resource(resource);
    return !!src && restrictable(src, actor);
  }

  /**
   * An event's `data` (the API object of a row) as `actor` may read it: masked by
   * its read rules, or null when no rule's rows match it or no role may read the resource.
   */
  async eventView(actor: Actor, resource: string, data: Doc): Promise<Doc | null> {
    let ra: ReadAccess | null;
    try {
      ra = await this.read(actor, resource);
    } catch (err) {
      if (err instanceof AccessDeniedError) return null;
      throw err;
    }
    if (!ra) return data;
    // The rules name `_id`; an API object may call it `id`.
    const row = '_id' in data ? data : { ...data, _id: data.id };
    if (!ra.sees(row)) return null;
    const masked = ra.mask(row);
    if (row === data) return masked;
    const { _id: _, ...rest } = masked;
    return { ...rest, id: data.id };
  }

  /** The read restriction of `actor` on `resource`; null when none applies. @throws AccessDeniedError when no role may read it */
  read(actor: Actor, resource: string): Promise<ReadAccess | null> {
    return this.restriction(actor, resource, 'read', (grants) => this.readOf(resource, grants));
  }

  private readOf(resource: string, grants: Grant[]): ReadAccess {
    const src = this.deps.resource(resource)!;
    const always = new Set(src.system);
    const readable = union(grants.map((g) => g.fields));
    const queryable = intersection(grants.map((g) => g.fields));
    const uniform = grants.every((g) => sameSet(g.fields, grants[0]!.fields));
    const keep = (doc: Doc, fields: ReadonlySet<string> | null): Doc =>
      fields ? Object.fromEntries(Object.entries(doc).filter(([k]) => always.has(k) || fields.has(k))) : doc;
    return {
      rows: rowsFilter(grants),
      sees: (doc) => grants.some((g) => !g.rows || matches(doc, g.rows)),
      readable, queryable,
      maskNeeds: uniform ? new Set() : grants.reduce((s, g) => (g.rows ? fieldsOf(g.rows, s) : s), new Set<string>()),
      mask: uniform ? (doc) => keep(doc, grants[0]!.fields) : (doc) => keep(doc, union(grants.filter((g) => !g.rows || matches(doc, g.rows)).map((g) => g.fields)) ?? null),
    };
  }

  /** The write restriction of `actor` for `action` on `resource`; null when none applies. @throws AccessDeniedError when no role may do it */
  write(actor: Actor, resource: string, action: Exclude<Action, 'read'>): Promise<WriteAccess | null> {
    return this.restriction(actor, resource, action, (grants): WriteAccess => ({ rows: rowsFilter(grants), decide: (w) => decide(grants, w) }));
  }

  /** The effective rule of a user, as `POST /admin/access/explain` answers it. */
  async explain(user: Actor, resource: string, action: Action): Promise<ExplainView> {
    const eff = await this.effective(user, resource, action);
    if (!eff.grants) return { allowed: true, roles: eff.roles, restricted: false, rows: null, fields: null, presets: {}, check: null, grants: [] };
    const g = eff.grants;
    const checks = g.map((x) => x.check);
    const fields = union(g.map((x) => x.fields));
    return {
      allowed: g.length > 0, roles: eff.roles, restricted: true,
      rows: g.length ? rowsFilter(g) : { $or: [] },
      fields: g.length ? (fields ? [...fields].sort() : null) : [],
      presets: Object.assign({}, ...g.map((x) => x.presets)) as Doc,
      check: checks.some((c) => !c) || !g.length ? null : checks.length === 1 ? checks[0]! : { $or: checks },
      grants: g.map((x) => ({ role: x.role, rows: x.rows, fields: x.fields ? [...x.fields].sort() : null, presets: x.presets, check: x.check })),
    };
  }
}

/** False exactly where {@link effective} applies no rule for a reason known from the role names (see `eventRestricted`). */
function restrictable(src: ResourceAccessSource, actor: Actor): boolean {
  if (hasSystemScope(actor)) return false;
  let ruledRole = false;
  for (const n of actor.roles) {
    const builtin = BUILTIN_ROLES.includes(n);
    const ruled = !builtin || !!src.code?.[n];
    if (builtin && !ruled) return false;
    ruledRole ||= ruled;
  }
  return ruledRole;
}

function denyEmpty(grants: Grant[], resource: string, action: Action): Grant[] {
  if (!grants.length) throw new AccessDeniedError(`Your roles do not allow ${action} on ${resource}`, { resource, action });
  return grants;
}

const union = (sets: (ReadonlySet<string> | null)[]): Set<string> | null => {
  if (sets.some((s) => s === null)) return null;
  return new Set(sets.flatMap((s) => [...s!]));
};

const intersection = (sets: (ReadonlySet<string> | null)[]): Set<string> | null => {
  const given = sets.filter((s): s is ReadonlySet<string> => s !== null);
  if (!given.length) return null;
  return new Set([...given[0]!].filter((f) => given.every((s) => s.has(f))));
};

const sameSet = (a: ReadonlySet<string> | null, b: ReadonlySet<string> | null): boolean =>
  a === b || (!!a && !!b && a.size === b.size && [...a].every((x) => b.has(x)));

/** The write's decision: the first grant allowing all of it gives its presets; else the most telling refusal. */
function decide(grants: readonly Grant[], w: WriteRequest): Doc {
  let field: string | null = null;
  let failedCheck = false;
  for (const g of grants) {
    if (w.old && g.rows && !matches(w.old, g.rows)) continue;
    const presetConflict = Object.entries(g.presets).find(([k, v]) => k in w.input && !matches({ v: w.input[k] }, { v }));
    if (presetConflict) {
      field ??= presetConflict[0];
      continue;
    }
    const denied = w.written.find((f) => !(f in g.presets) && g.fields && !g.fields.has(f));
    if (denied) {
      field ??= denied;
      continue;
    }
    const result = w.result(g.presets);
    if ((g.check && !matches(result, g.check)) || (!w.old && g.rows && !matches(result, g.rows))) {
      failedCheck = true;
      continue;
    }
    return g.presets;
  }
  if (failedCheck || field === null) throw new AccessDeniedError('The document would not satisfy your role\'s check', { reason: 'check' });
  throw new AccessDeniedError(`You may not write field '${field}'`, { field });
}
