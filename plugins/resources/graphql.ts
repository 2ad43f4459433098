import { Types } from 'mongoose';
import type { Builder } from '../../core/graphql.ts';
import { requireUser } from '../../core/graphql.ts';
import { BadRequestError, NotFoundError } from '../../core/errors.ts';
import type { Doc } from '../../core/hooks.ts';
import type { FieldInfo } from './fields.ts';
import type { ResourceRegistry } from './registry.ts';
import { etagOf, type RawQuery } from './service.ts';

const lowerFirst = (s: string) => s.charAt(0).toLowerCase() + s.slice(1);
const camel = (s: string) => s.replace(/_(\w)/g, (_m, c: string) => c.toUpperCase());
const idString = (v: unknown) => (v == null ? null : v instanceof Types.ObjectId ? v.toHexString() : typeof v === 'object' && '_id' in v ? String((v as Doc)._id) : String(v));

type ScalarName = 'String' | 'Float' | 'Int' | 'Boolean' | 'DateTime' | 'ID' | 'JSON';
const scalarOf = (kind: FieldInfo['kind'] | undefined): ScalarName => {
  switch (kind) {
    case 'string': return 'String';
    case 'number': return 'Float';
    case 'integer': return 'Int';
    case 'boolean': return 'Boolean';
    case 'date': return 'DateTime';
    case 'objectId': return 'ID';
    default: return 'JSON';
  }
};

/** GraphQL list arguments → the same raw query object REST receives, so one parser serves both. */
function toRawQuery(a: Record<string, unknown>): RawQuery {
  const raw: RawQuery = {};
  const put = (k: string, v: unknown) => {
    if (v === undefined || v === null) return;
    raw[k] = Array.isArray(v) ? v.map(String).join(',') : typeof v === 'object' ? JSON.stringify(v) : String(v);
  };
  const filter = a.filter as Record<string, unknown> | null | undefined;
  if (filter !== undefined && filter !== null && (typeof filter !== 'object' || Array.isArray(filter))) throw new BadRequestError('filter must be an object', { param: 'filter' });
  // A null filter value is an equality on null (REST `field=null`), not an absent filter.
  if (filter && typeof filter === 'object' && !Array.isArray(filter)) for (const [k, v] of Object.entries(filter)) put(k, v === null ? 'null' : v);
  for (const k of ['page', 'per_page', 'cursor', 'limit', 'direction', 'sort', 'q', 'include_deleted', 'populate']) put(k, a[k]);
  // `etag` (non-null) is computed from `version`: a projection must keep it.
  if (Array.isArray(a.fields)) put('fields', [...(a.fields as unknown[]), 'version']);
  if (a.where !== undefined && a.where !== null) raw.where = typeof a.where === 'string' ? a.where : JSON.stringify(a.where);
  put('tags__in', a.tags_in);
  put('tags__all', a.tags_all);
  put('tags__nin', a.tags_nin);
  return raw;
}

/**
 * Per resource: an object type, `<name>` list query (both pagination modes, same filters as REST),
 * `<singular>` get-one, and create/update/replace/delete mutations with the same ETag rules.
 */
export function resourceGraphQL(builder: Builder, registry: ResourceRegistry) {
  const services = registry.list();
  const refs = new Map(services.map((s) => [s.def.name, builder.objectRef<Doc>(s.def.graphqlName)]));

  const Cursors = builder.objectRef<{ next: string | null; prev: string | null; has_next: boolean; has_prev: boolean }>('Cursors');
  Cursors.implement({
    fields: (t) => ({
      next: t.exposeString('next'),
      prev: t.exposeString('prev'),
      has_next: t.exposeBoolean('has_next', { nullable: false }),
      has_prev: t.exposeBoolean('has_prev', { nullable: false }),
    }),
  });

  for (const svc of services) {
    const { def } = svc;
    const ref = refs.get(def.name)!;
    ref.implement({
      fields: (t) => {
        const fields: Record<string, unknown> = {
          _id: t.id({ nullable: false, resolve: (d) => idString(d._id)! }),
          etag: t.string({ nullable: false, resolve: (d) => etagOf(d.version) }),
          tenant_id: t.id({ resolve: (d) => idString(d.tenant_id) }),
          created_at: t.field({ type: 'DateTime', resolve: (d) => (d.created_at as Date | null) ?? null }),
          updated_at: t.field({ type: 'DateTime', resolve: (d) => (d.updated_at as Date | null) ?? null }),
          created_by: t.id({ resolve: (d) => idString(d.created_by) }),
          updated_by: t.id({ resolve: (d) => idString(d.updated_by) }),
          is_deleted: t.boolean({ resolve: (d) => (d.is_deleted as boolean | undefined) ?? null }),
          deleted_at: t.field({ type: 'DateTime', resolve: (d) => (d.deleted_at as Date | null) ?? null }),
          deleted_by: t.id({ resolve: (d) => idString(d.deleted_by) }),
          version: t.int({ resolve: (d) => (d.version as number | undefined) ?? null }),
        };
        for (const f of def.fields) {
          if (f.private || f.path.includes('.')) continue;
          const scalar = scalarOf(f.kind === 'array' ? f.items : f.kind);
          const conv = (v: unknown) => (scalar === 'ID' ? idString(v) : v ?? null);
          fields[f.path] =
            f.kind === 'array'
              ? t.field({ type: [scalar], resolve: (d) => ((d[f.path] as unknown[] | undefined) ?? null)?.map(conv) as never })
              : t.field({ type: scalar, resolve: (d) => conv(d[f.path]) as never });
          const target = f.ref && f.kind === 'objectId' ? refs.get(f.ref) : undefined;
          const targetSvc = f.ref ? registry.get(f.ref) : undefined;
          if (target && targetSvc && def.populatable.includes(f.path)) {
            // Relation as an object: read through the related resource's own scope (tenant, guards, soft delete).
            fields[camel(f.path.replace(/_id$/, ''))] = t.field({
              type: target,
              resolve: async (d, _a, ctx) => {
                const v = d[f.path];
                if (v == null) return null;
                try {
                  return await targetSvc.get(requireUser(ctx), idString(v)!);
                } catch (err) {
                  if (err instanceof NotFoundError) return null;
                  throw err;
                }
              },
            });
          }
        }
        return fields as never;
      },
    });

    const Page = builder.objectRef<{ items: Doc[]; total?: number; page?: number; per_page?: number; total_pages?: number; cursors?: unknown }>(`${def.graphqlName}Page`);
    Page.implement({
      description: `A page of ${def.name}: offset mode fills total/page/per_page/total_pages, cursor mode fills cursors`,
      fields: (t) => ({
        items: t.field({ type: [ref], nullable: false, resolve: (p) => p.items }),
        total: t.int({ resolve: (p) => p.total ?? null }),
        page: t.int({ resolve: (p) => p.page ?? null }),
        per_page: t.int({ resolve: (p) => p.per_page ?? null }),
        total_pages: t.int({ resolve: (p) => p.total_pages ?? null }),
        cursors: t.field({ type: Cursors, resolve: (p) => (p.cursors as never) ?? null }),
      }),
    });

    const listName = lowerFirst(camel(def.name));
    const oneName = lowerFirst(def.graphqlName);
    // e.g. name 'regional' → list and get-one would both be `regional`, and one would silently replace the other.
    if (listName === oneName) throw new Error(`Resource "${def.name}": GraphQL list and get-one fields would both be named "${listName}"; set graphql_name`);
    builder.queryFields((t) => ({
      [listName]: t.field({
        type: Page,
        nullable: false,
        description: `List ${def.name}; arguments mirror the REST query parameters`,
        args: {
          where: t.arg({ type: 'JSON', description: 'Same as REST `where` (object or JSON string)' }),
          filter: t.arg({ type: 'JSON', description: 'Equality and suffix filters as REST parameters, e.g. {"budget__gt": 10}' }),
          q: t.arg.string(),
          tags_in: t.arg.stringList(),
          tags_all: t.arg.stringList(),
          tags_nin: t.arg.stringList(),
          sort: t.arg.string(),
          fields: t.arg.stringList(),
          populate: t.arg.stringList(),
          page: t.arg.int(),
          per_page: t.arg.int(),
          limit: t.arg.int(),
          cursor: t.arg.string(),
          direction: t.arg.string(),
          include_deleted: t.arg.boolean(),
        },
        resolve: async (_r, args, ctx) => {
          const res = await svc.list(requireUser(ctx), toRawQuery(args as Record<string, unknown>));
          return res.mode === 'cursor' ? { items: res.items, cursors: res.cursors } : res;
        },
      }),
      [oneName]: t.field({
        type: ref,
        args: { id: t.arg.id({ required: true }), include_deleted: t.arg.boolean() },
        resolve: async (_r, args, ctx) => svc.get(requireUser(ctx), String(args.id), { includeDeleted: !!args.include_deleted }),
      }),
    }));
    builder.mutationFields((t) => ({
      [`create${def.graphqlName}`]: t.field({
        type: ref, nullable: false, args: { input: t.arg({ type: 'JSON', required: true }) },
        resolve: (_r, args, ctx) => svc.create(requireUser(ctx), args.input),
      }),
      [`update${def.graphqlName}`]: t.field({
        type: ref, nullable: false,
        args: { id: t.arg.id({ required: true }), if_match: t.arg.string(), input: t.arg({ type: 'JSON', required: true }) },
        resolve: (_r, args, ctx) => svc.update(requireUser(ctx), String(args.id), args.if_match, args.input, false),
      }),
      [`replace${def.graphqlName}`]: t.field({
        type: ref, nullable: false,
        args: { id: t.arg.id({ required: true }), if_match: t.arg.string(), input: t.arg({ type: 'JSON', required: true }) },
        resolve: (_r, args, ctx) => svc.update(requireUser(ctx), String(args.id), args.if_match, args.input, true),
      }),
      [`delete${def.graphqlName}`]: t.field({
        type: ref, nullable: false, description: 'Soft delete; returns the deleted document',
        args: { id: t.arg.id({ required: true }), if_match: t.arg.string() },
        resolve: (_r, args, ctx) => svc.remove(requireUser(ctx), String(args.id), args.if_match),
      }),
    }));
  }
}

