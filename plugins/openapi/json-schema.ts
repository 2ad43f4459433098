/**
 * zod → JSON Schema 2020-12 (the dialect of OpenAPI 3.1) with zod 4's own `z.toJSONSchema`. The
 * `$defs` it emits (recursive or `.meta({ id })` schemas) are moved to `components.schemas`,
 * because a `#/$defs/...` reference would resolve against the root of the OpenAPI document.
 */
import { z } from 'zod';
import type { JsonSchema, Reference } from './types.ts';

/** A schema as `z.toJSONSchema` returns it: with its dialect and local definitions. */
type RawJsonSchema = JsonSchema & { $schema?: string; $defs?: Record<string, JsonSchema> };

export const schemaRef = (name: string): Reference => ({ $ref: `#/components/schemas/${name}` });

export const isRecord = (x: unknown): x is Record<string, unknown> => !!x && typeof x === 'object' && !Array.isArray(x);

/** JSON encodes dates as ISO strings; say so instead of `{}` (zod calls `z.date()` unrepresentable). */
const dateAsString = (ctx: { zodSchema: { _zod: { def: { type: string } } }; jsonSchema: JsonSchema }): void => {
  if (ctx.zodSchema._zod.def.type === 'date') {
    ctx.jsonSchema.type = 'string';
    ctx.jsonSchema.format = 'date-time';
  }
};

/** Replaces every `$ref` of a schema tree through `map` (exact `#` or a `#/$defs/<name>` prefix). */
function rewriteRefs(node: unknown, map: (ref: string) => string): unknown {
  if (Array.isArray(node)) return node.map((x) => rewriteRefs(x, map));
  if (!isRecord(node)) return node;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(node)) out[k] = k === '$ref' && typeof v === 'string' ? map(v) : rewriteRefs(v, map);
  return out;
}

function hasRef(node: unknown, ref: string): boolean {
  if (Array.isArray(node)) return node.some((x) => hasRef(x, ref));
  if (!isRecord(node)) return false;
  return Object.entries(node).some(([k, v]) => (k === '$ref' ? v === ref : hasRef(v, ref)));
}

/** Converts zod schemas into one document's `components.schemas`, naming hoisted definitions without collisions. */
export class SchemaConverter {
  constructor(
    /** `components.schemas` of the document being built. */
    private readonly schemas: Record<string, JsonSchema>,
    private readonly warn: (obj: object, msg: string) => void,
  ) {}

  /**
   * zod → JSON Schema 2020-12 with `$defs` hoisted to `components.schemas`. Never throws: a schema
   * that cannot be converted is documented as `{}` (any value) and logged.
   */
  convert(schema: z.ZodType, io: 'input' | 'output', where: string, name: string): JsonSchema | Reference {
    let raw: RawJsonSchema;
    try {
      raw = z.toJSONSchema(schema, { io, unrepresentable: 'any', override: dateAsString as never }) as RawJsonSchema;
    } catch (err) {
      this.warn({ route: where, part: name, err }, 'zod schema could not be converted; documented as {}');
      return {};
    }
    return this.hoist(raw, name, io);
  }

  private hoist(raw: RawJsonSchema, name: string, io: 'input' | 'output'): JsonSchema | Reference {
    const { $schema: _dialect, $defs, ...root } = raw;
    const defs = isRecord($defs) ? ($defs as Record<string, JsonSchema>) : {};
    const selfRef = hasRef(raw, '#');
    if (!Object.keys(defs).length && !selfRef) return root;

    const schemas = this.schemas;
    const names = new Map<string, string>();
    const rootName = selfRef ? this.freeName(name) : undefined;
    // Named (`.meta({ id })`) defs keep their id, anonymous ones (`__schema0`) get the route's name.
    for (const key of Object.keys(defs)) names.set(key, /^__schema\d+$/.test(key) ? this.freeName(`${name}_${key.slice(2)}`) : key);
    const map = (ref: string): string => {
      if (ref === '#') return `#/components/schemas/${rootName}`;
      const m = /^#\/\$defs\/([^/]+)(.*)$/.exec(ref);
      const target = m ? names.get(m[1]!) : undefined;
      return m && target ? `#/components/schemas/${target}${m[2]}` : ref;
    };
    // The same id can convert differently (input vs output side, e.g. a default): never overwrite.
    for (const [key, def] of Object.entries(defs)) {
      const wanted = names.get(key)!;
      const body = rewriteRefs(def, map) as JsonSchema;
      const existing = schemas[wanted];
      if (existing && JSON.stringify(existing) !== JSON.stringify(body)) {
        const alt = this.freeName(`${wanted}${io === 'input' ? 'Input' : 'Output'}`, body);
        names.set(key, alt);
      }
    }
    for (const [key, def] of Object.entries(defs)) schemas[names.get(key)!] ??= rewriteRefs(def, map) as JsonSchema;
    const rewritten = rewriteRefs(root, map) as JsonSchema;
    if (!rootName) return rewritten;
    schemas[rootName] = rewritten;
    return schemaRef(rootName);
  }

  /** A component name not yet taken (or taken by an identical schema when `same` is given). */
  private freeName(wanted: string, same?: JsonSchema): string {
    const schemas = this.schemas;
    const ok = (n: string) => !schemas[n] || (same !== undefined && JSON.stringify(schemas[n]) === JSON.stringify(same));
    if (ok(wanted)) return wanted;
    let n = 2;
    while (!ok(`${wanted}_${n}`)) n++;
    return `${wanted}_${n}`;
  }

  /** Follows one `$ref` into `components.schemas` (a hoisted recursive root). */
  deref(schema: JsonSchema | Reference): JsonSchema {
    const ref = schema.$ref;
    const target = ref?.startsWith('#/components/schemas/') ? this.schemas[ref.slice('#/components/schemas/'.length)] : undefined;
    // SchemaObject allows `$ref` too: an unresolvable reference stays as it is.
    return target ?? (schema as JsonSchema);
  }
}
