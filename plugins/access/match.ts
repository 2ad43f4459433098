/**
 * An in-memory evaluator of the `where` language, with MongoDB's semantics for the operators the
 * language allows: which grants of a role hold for a row already read (the field mask), a write's
 * `check` against the document it would produce, and the differential test's oracle.
 */
type Filter = Record<string, unknown>;

const isObjectIdLike = (v: unknown): boolean => !!v && typeof v === 'object' && (v as { _bsontype?: string })._bsontype === 'ObjectId';

/** Values as compared: object ids by their hex, dates by their time. */
function norm(v: unknown): unknown {
  if (isObjectIdLike(v)) return String(v);
  if (v instanceof Date) return v.getTime();
  return v;
}

function equal(a: unknown, b: unknown): boolean {
  const x = norm(a);
  const y = norm(b);
  if (Array.isArray(x) && Array.isArray(y)) return x.length === y.length && x.every((v, i) => equal(v, y[i]));
  if (x === null || x === undefined) return y === null || y === undefined;
  return x === y;
}

/** Values at a dotted path, descending into arrays as MongoDB does; `missing` when the path is absent. */
function valuesAt(doc: unknown, path: string[]): { values: unknown[]; missing: boolean } {
  if (path.length === 0) return { values: [doc], missing: false };
  if (Array.isArray(doc)) {
    const out = doc.map((d) => valuesAt(d, path));
    return { values: out.flatMap((o) => o.values), missing: out.every((o) => o.missing) };
  }
  if (!doc || typeof doc !== 'object' || isObjectIdLike(doc) || doc instanceof Date) return { values: [], missing: true };
  const [head, ...rest] = path;
  if (!(head! in (doc as Filter))) return { values: [], missing: true };
  return valuesAt((doc as Filter)[head!], rest);
}

/** Candidates a comparison looks at: the value, and each element when it is an array. */
const candidates = (values: unknown[]): unknown[] => values.flatMap((v) => (Array.isArray(v) ? [v, ...v] : [v]));

function compare(a: unknown, b: unknown): number | null {
  const x = norm(a);
  const y = norm(b);
  if (typeof x === 'number' && typeof y === 'number') return x - y;
  if (typeof x === 'string' && typeof y === 'string') return x < y ? -1 : x > y ? 1 : 0;
  if (typeof x === 'boolean' && typeof y === 'boolean') return Number(x) - Number(y);
  return null;
}

function eqMatch(values: unknown[], missing: boolean, target: unknown): boolean {
  if (target === null && missing) return true;
  return candidates(values).some((v) => equal(v, target));
}

function operatorMatch(values: unknown[], missing: boolean, op: string, arg: unknown, spec: Filter): boolean {
  switch (op) {
    case '$eq':
      return eqMatch(values, missing, arg);
    case '$ne':
      return !eqMatch(values, missing, arg);
    case '$gt':
    case '$gte':
    case '$lt':
    case '$lte':
      return candidates(values).some((v) => {
        const c = compare(v, arg);
        if (c === null) return false;
        return op === '$gt' ? c > 0 : op === '$gte' ? c >= 0 : op === '$lt' ? c < 0 : c <= 0;
      });
    case '$in':
      return (arg as unknown[]).some((t) => eqMatch(values, missing, t));
    case '$nin':
      return !(arg as unknown[]).some((t) => eqMatch(values, missing, t));
    case '$exists':
      return arg ? !missing : missing;
    case '$regex': {
      const re = new RegExp(arg as string, typeof spec.$options === 'string' ? spec.$options.replace('x', '') : '');
      return candidates(values).some((v) => typeof v === 'string' && re.test(v));
    }
    case '$options':
      return true;
    case '$all':
      return (arg as unknown[]).every((t) => values.some((v) => Array.isArray(v) && v.some((e) => equal(e, t))));
    case '$size':
      return values.some((v) => Array.isArray(v) && v.length === arg);
    case '$not':
      return !fieldMatch(values, missing, arg);
    case '$elemMatch':
      return values.some((v) => Array.isArray(v) && v.some((e) => elemMatch(e, arg as Filter)));
    default:
      throw new Error(`Operator ${op} is not evaluated in memory`);
  }
}

function elemMatch(elem: unknown, spec: Filter): boolean {
  const opStyle = Object.keys(spec).every((k) => k.startsWith('$') && !['$and', '$or', '$nor'].includes(k));
  if (opStyle) return Object.entries(spec).every(([op, arg]) => operatorMatch([elem], false, op, arg, spec));
  return matches(elem as Filter, spec);
}

function fieldMatch(values: unknown[], missing: boolean, spec: unknown): boolean {
  if (spec && typeof spec === 'object' && !Array.isArray(spec) && !isObjectIdLike(spec) && !(spec instanceof Date)) {
    const ops = spec as Filter;
    return Object.entries(ops).every(([op, arg]) => operatorMatch(values, missing, op, arg, ops));
  }
  return eqMatch(values, missing, spec);
}

/** Whether `doc` matches `filter` (a filter of the `where` language with its values resolved). */
export function matches(doc: Filter, filter: Filter): boolean {
  for (const [key, spec] of Object.entries(filter)) {
    if (key === '$and') {
      if (!(spec as Filter[]).every((f) => matches(doc, f))) return false;
    } else if (key === '$or') {
      if (!(spec as Filter[]).some((f) => matches(doc, f))) return false;
    } else if (key === '$nor') {
      if ((spec as Filter[]).some((f) => matches(doc, f))) return false;
    } else {
      const { values, missing } = valuesAt(doc, key.split('.'));
      if (!fieldMatch(values, missing, spec)) return false;
    }
  }
  return true;
}

/** The top-level fields a filter reads (to project them when a mask must be computed per row). */
export function fieldsOf(filter: Filter, out = new Set<string>()): Set<string> {
  for (const [key, spec] of Object.entries(filter)) {
    if (key === '$and' || key === '$or' || key === '$nor') for (const f of spec as Filter[]) fieldsOf(f, out);
    else if (!key.startsWith('$')) out.add(key.split('.')[0]!);
  }
  return out;
}
