/**
 * Resource writes as mongoose would make them, without a mongoose document or query. A create built
 * a document (`model.create`: construction, validation, save middleware, two `toObject` copies) and an
 * update went through mongoose's query pipeline (filter and update casting, update validators), and
 * both cost more server CPU than the database write itself (bench/history/performance.md, "The write path").
 * Here the same steps run on a plain object: each value goes through its path's own mongoose caster
 * and setters (`applySetters`, `castForQuery`) and its built-in validators (`doValidateSync`), and
 * defaults are applied in mongoose's order, so the stored document is the one mongoose would store.
 *
 * Only for schemas made of what that covers: top-level paths of scalar, Mixed or scalar-array types
 * whose options are known built-ins, no user middleware, no custom validators or setters. Anything
 * else, and any value that fails (a cast or validation error, an unknown field), returns null: the
 * caller then takes the mongoose path, which throws the error mongoose always threw.
 */
import { Types, type Connection, type Model, type Schema, type SchemaType } from 'mongoose';
import { OUTBOX_FIELD } from '../events/public/outbox.ts';
import { BASE_FIELDS } from './fields.ts';
import type { Doc } from '../../core/hooks.ts';

/** Options whose effect is covered here (casting, the built-in setters and validators) or that do not act on writes. */
const KNOWN_OPTIONS = new Set([
  'type', 'required', 'default', 'enum', 'min', 'max', 'minlength', 'maxlength', 'minLength', 'maxLength', 'match',
  'trim', 'lowercase', 'uppercase', 'ref', 'index', 'unique', 'sparse', 'integer', 'private', 'select', 'auto', 'description',
]);
/** Validator kinds of the options above (`match` is `regexp`). */
const BUILTIN_VALIDATORS = new Set(['required', 'min', 'max', 'minlength', 'maxlength', 'enum', 'regexp']);
const KINDS = new Set(['String', 'Number', 'Boolean', 'Date', 'ObjectId', 'Mixed', 'Array']);
const BUILT_IN = Symbol.for('mongoose:built-in-middleware');

interface PathPlan {
  path: string;
  type: Internal;
  kind: string;
  /** The default mongoose applies before it sets the given values (a fresh value each time), or none. */
  default: (() => unknown) | null;
}

type Internal = SchemaType & {
  instance: string;
  options: Record<string, unknown>;
  setters: unknown[];
  validators: { type?: string; validator: unknown }[];
  defaultValue: unknown;
  embeddedSchemaType?: Internal;
  applySetters(v: unknown, scope: unknown, init?: boolean): unknown;
  castForQuery(cond: null, v: unknown, ctx: unknown): unknown;
  doValidateSync(v: unknown, scope: unknown): unknown;
};

/** User middleware on `hooks` of the given names (mongoose's own is marked as built-in). */
function hasUserHooks(schema: Schema, names: string[]): boolean {
  const hooks = (schema as unknown as { s?: { hooks?: { _pres?: Map<string, { fn: Record<symbol, unknown> }[]>; _posts?: Map<string, { fn: Record<symbol, unknown> }[]> } } }).s?.hooks;
  if (!hooks?._pres || !hooks._posts) return true;
  return names.some((n) => [...(hooks._pres!.get(n) ?? []), ...(hooks._posts!.get(n) ?? [])].some((h) => !h.fn?.[BUILT_IN]));
}

function planOf(path: string, t: Internal): PathPlan | null {
  if (path.includes('.') || !KINDS.has(t.instance)) return null;
  if (Object.keys(t.options).some((k) => !KNOWN_OPTIONS.has(k))) return null;
  if (t.options.required !== undefined && typeof t.options.required !== 'boolean') return null;
  if (t.options.select === false) return null;
  // trim, lowercase and uppercase are mongoose's own setters; a `set` option is excluded above.
  if (t.validators.some((v) => !BUILTIN_VALIDATORS.has(v.type ?? '') || typeof v.validator === 'function' && v.validator.constructor.name === 'AsyncFunction')) return null;
  if (t.instance === 'Array') {
    const inner = t.embeddedSchemaType;
    if (!inner || !KINDS.has(inner.instance) || inner.instance === 'Array' || inner.validators.length || inner.setters.length) return null;
    if (Object.keys(inner.options ?? {}).some((k) => !KNOWN_OPTIONS.has(k))) return null;
  }
  // Mongoose applies defaults in two passes: values and the functions marked `$runBeforeSetters` (an
  // `_id`, an array's `[]`) before the given values, other functions after them (they may read the
  // document). Only the first kind is covered.
  const d = t.defaultValue as unknown;
  let def: PathPlan['default'] = null;
  if (typeof d === 'function') {
    if (!(d as { $runBeforeSetters?: boolean }).$runBeforeSetters) return null;
    const given = t.options.default;
    if (path === '_id' && t.instance === 'ObjectId') def = () => new Types.ObjectId();
    else if (t.instance === 'Array' && (given === undefined || (Array.isArray(given) && !given.length))) def = () => [];
    else return null;
  } else if (d !== undefined) {
    if (d !== null && typeof d === 'object') return null;
    const value = t.applySetters(d, null, false);
    def = () => value;
  }
  return { path, type: t, kind: t.instance, default: def };
}

/** `$set` values of an update that the service builds with their stored types (no casting). */
const SERVER_SET: ReadonlySet<string> = new Set(['updated_at', 'updated_by', OUTBOX_FIELD]);
/**
 * Values of a new document that the service builds with their stored types: the base fields (which
 * have no validators) and the outbox. Casting them changes nothing; the outbox's array would cost a
 * mongoose array (a proxy) per insert.
 */
const SERVER_INSERT: ReadonlySet<string> = new Set([...Object.keys(BASE_FIELDS), OUTBOX_FIELD]);

const NONE: ReadonlySet<string> = new Set();

/** The mongoose-exact plain writes of one resource's schema (see the module comment). */
export class PlainWriter {
  private readonly plans: PathPlan[] | null;
  private readonly byPath = new Map<string, PathPlan>();
  /** Whether inserts may skip mongoose (no save/validate middleware of the resource's own). */
  readonly inserts: boolean;
  /** Whether updates may skip mongoose (no query middleware of the resource's own). */
  readonly updates: boolean;

  private collection?: ReturnType<NonNullable<Connection['db']>['collection']>;

  constructor(private readonly model: Model<Doc>) {
    const schema: Schema = model.schema;
    const o = schema.options as Record<string, unknown>;
    const plans: PathPlan[] = [];
    let ok = o.strict === 'throw' && o.versionKey === false && o.minimize === false && !o.timestamps && !o.toObject
      && !(schema as unknown as { discriminators?: unknown }).discriminators;
    if (ok) {
      for (const [path, t] of Object.entries(schema.paths)) {
        const plan = planOf(path, t as Internal);
        if (!plan) {
          ok = false;
          break;
        }
        plans.push(plan);
      }
    }
    this.plans = ok ? plans : null;
    for (const p of plans) this.byPath.set(p.path, p);
    this.inserts = ok && o.validateBeforeSave !== false && !hasUserHooks(schema, ['save', 'validate', 'init']);
    this.updates = ok && !hasUserHooks(schema, ['findOneAndUpdate', 'init']);
  }

  /** The driver's collection itself: mongoose's wrapper (command buffering, debug hooks) costs on the hot path, and the connection is open once requests arrive. */
  driver() {
    return (this.collection ??= this.model.db.db!.collection(this.model.collection.collectionName));
  }

  /** Stores a new document as `model.create` would (the plain object when the schema allows), and returns it. */
  async insert(data: Doc): Promise<Doc> {
    const plain = this.inserts ? this.build(data, true, SERVER_INSERT) : null;
    if (!plain) return (await this.model.create(data)).toObject() as Doc;
    await this.driver().insertOne(plain);
    return plain;
  }

  /**
   * `findOneAndUpdate(filter, {$set, $unset, $inc: {version: 1}}, {runValidators: true})`, answering the
   * document after it (null when nothing matched). `plainFilter`: the filter holds only values the
   * service built with their stored types, so mongoose need not cast it.
   */
  async updateIf(filter: Doc, plainFilter: boolean, set: Doc, unset: Record<string, 1>): Promise<Doc | null> {
    const cast = plainFilter ? this.castSet(set, Object.keys(unset), SERVER_SET) : null;
    const update = (s: Doc) => ({ $set: s, ...(Object.keys(unset).length ? { $unset: unset } : {}), $inc: { version: 1 } });
    if (cast) return (await this.driver().findOneAndUpdate(filter, update(cast), { returnDocument: 'after' })) as Doc | null;
    return this.model.findOneAndUpdate(filter, update(set), { returnDocument: 'after', runValidators: true }).lean<Doc>();
  }

  /**
   * The change of {@link updateIf} as an update pipeline whose first stage sets `computed` (e.g. an
   * outbox built by the database from the document), answering the document as it was before the
   * write and the `$set` values as stored. `undefined` when mongoose must cast or validate a value
   * (nothing was written), null when nothing matched. `set` paths must be top-level.
   */
  async updateComputedIf(filter: Doc, set: Doc, unset: Record<string, 1>, version: number, computed: Doc): Promise<{ before: Doc; set: Doc } | null | undefined> {
    const cast = this.castSet(set, Object.keys(unset), SERVER_SET);
    if (!cast) return undefined;
    // Pipeline values are expressions: a string starting with `$` would name a field. Literals.
    const values: Doc = { version: { $literal: version + 1 } };
    for (const [k, v] of Object.entries(cast)) values[k] = { $literal: v };
    const stages: Doc[] = [{ $set: computed }, { $set: values }];
    if (Object.keys(unset).length) stages.push({ $unset: Object.keys(unset) });
    const before = (await this.driver().findOneAndUpdate({ ...filter, version }, stages, { returnDocument: 'before' })) as Doc | null;
    return before ? { before, set: { ...cast, version: version + 1 } } : null;
  }

  /**
   * The document `new Model(data)` would hold (cast, setters, defaults, in mongoose's key order), or
   * null when mongoose must decide (a failed cast, an unknown field). `validate` also runs the
   * validators (null when one fails), as a create's save does; a replace's defaults skip them.
   * Given values of `trusted` paths are built by the service with their stored types: taken as they are.
   */
  build(data: Doc, validate: boolean, trusted: ReadonlySet<string> = NONE): Doc | null {
    if (!this.plans) return null;
    for (const k in data) if (!this.byPath.has(k) || data[k] === undefined) return null;
    // A new document's keys follow the schema's path order, whatever the order of the given values.
    const out: Doc = {};
    const asGiven = (p: PathPlan) => trusted.has(p.path) && data[p.path] !== undefined;
    try {
      for (const p of this.plans) {
        const given = data[p.path];
        let v: unknown;
        if (asGiven(p)) v = given;
        else if (given !== undefined) {
          v = p.type.applySetters(given, null, false);
          if (p.kind === 'Array' && v) v = Array.from(v as unknown[]);
        } else if (p.default) v = p.default();
        if (v !== undefined) out[p.path] = v;
      }
    } catch {
      return null;
    }
    if (validate) for (const p of this.plans) if (!asGiven(p) && p.type.doValidateSync(out[p.path], null)) return null;
    return out;
  }

  /**
   * `$set` values as mongoose's update casting and update validators make them (`runValidators`),
   * or null when mongoose must decide. `unset` paths must not be required. Values built by the
   * service itself (`trusted`: timestamps, actor ids, the outbox) are passed as they are.
   */
  castSet(set: Doc, unset: readonly string[], trusted: ReadonlySet<string>): Doc | null {
    if (!this.plans || !this.updates) return null;
    const out: Doc = {};
    try {
      for (const [k, raw] of Object.entries(set)) {
        if (trusted.has(k)) {
          out[k] = raw;
          continue;
        }
        const p = this.byPath.get(k);
        if (!p || raw === undefined) return null;
        const t = p.type;
        const v = p.kind === 'Mixed' || p.kind === 'Array' ? t.applySetters(raw, null) : t.castForQuery(null, raw, null);
        out[k] = p.kind === 'Array' && v ? Array.from(v as unknown[]) : v;
        if (t.doValidateSync(out[k], null)) return null;
      }
    } catch {
      return null;
    }
    for (const k of unset) {
      const p = this.byPath.get(k);
      if (!p || p.type.options.required) return null;
    }
    return out;
  }
}
