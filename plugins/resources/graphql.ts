import { Types } from 'mongoose';
import type { ArgBuilder, InputFieldMap } from '@pothos/core';
import type { Builder, BuilderTypes } from '../../core/graphql.ts';
import { cursorsObject, scopes } from '../../core/graphql.ts';
import { AccessDeniedError, NotFoundError } from '../../core/errors.ts';
import type { Doc } from '../../core/hooks.ts';
import { BASE_FIELDS, type FieldInfo } from './fields.ts';
import { FILTER_ARG_DOC, LIST_PARAMS, type ListArgs, type ListParam } from './params.ts';
import type { Operation } from './define.ts';
import type { ResourceRegistry } from './registry.ts';
import { etagOf } from '../../lib/etag.ts';
import type { Actor } from '../../core/context.ts';
import { resourceTypesGraphQL } from './graphql-types.ts';
import type { Versions } from './versions/service.ts';
import { versionsGraphQL } from './versions/graphql.ts';
import { draftOptionsOf } from './drafts/fields.ts';
import { RESOURCE_PERMISSIONS } from './service.ts';
import { getWithDraft, publishDraft, saveDraft, unpublish } from './drafts/service.ts';
import { documentActions } from './actions.ts';

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

type Arg = ArgBuilder<PothosSchemaTypes.ExtendDefaultTypes<BuilderTypes>>;

/** The GraphQL list arguments, from the one table of list parameters (params.ts), in their printed order. */
function listArgs(arg: Arg): InputFieldMap {
  const argOf = (p: ListParam): InputFieldMap[string] => {
    switch (p.kind) {
      case 'int': return arg.int();
      case 'boolean': return arg.boolean();
      case 'list': return arg.stringList();
      case 'json': return arg({ type: 'JSON', description: p.graphqlDoc });
      default: return arg.string();
    }
  };
  const ordered = [...LIST_PARAMS].sort((a, b) => a.graphqlOrder - b.graphqlOrder).map((p): [string, InputFieldMap[string]] => [p.arg, argOf(p)]);
  // `filter` (GraphQL only: the query string's field filters as one object) follows `where`.
  return Object.fromEntries([ordered[0]!, ['filter', arg({ type: 'JSON', description: FILTER_ARG_DOC })], ...ordered.slice(1)]);
}

/**
 * Per resource: an object type, `<name>` list query (both pagination modes, same filters as REST),
 * `<singular>` get-one, and create/update/replace/delete mutations with the same ETag rules.
 */
export function resourceGraphQL(builder: Builder, registry: ResourceRegistry, versions: Versions) {
  const services = registry.list();
  const refs = new Map(services.map((s) => [s.def.name, builder.objectRef<Doc>(s.def.graphqlName)]));

  const Cursors = cursorsObject(builder, 'Cursors');
  resourceTypesGraphQL(builder, registry);

  for (const svc of services) {
    const { def } = svc;
    const ref = refs.get(def.name)!;
    ref.implement({
      fields: (t) => {
        /** A scalar (or list of scalars) field read from the document; ids are returned as hex strings. */
        const scalarField = (path: string, kind: FieldInfo['kind'], items?: FieldInfo['items']) => {
          const scalar = scalarOf(kind === 'array' ? items : kind);
          const conv = (v: unknown) => (scalar === 'ID' ? idString(v) : v ?? null);
          return kind === 'array'
            ? t.field({ type: [scalar], resolve: (d) => ((d[path] as unknown[] | undefined) ?? null)?.map(conv) as never })
            : t.field({ type: scalar, resolve: (d) => conv(d[path]) as never });
        };
        const fields: Record<string, unknown> = {
          _id: t.id({ nullable: false, resolve: (d) => idString(d._id)! }),
          etag: t.string({ nullable: false, resolve: (d) => etagOf(d.version) }),
        };
        for (const [name, { kind }] of Object.entries(BASE_FIELDS)) fields[name] = scalarField(name, kind);
        if (def.drafts) fields._status = t.string({ nullable: false, description: 'draft: not published, or its pending draft shown (draft: true)', resolve: (d) => String(d._status ?? 'published') });
        fields._actions = t.withAuth(scopes(RESOURCE_PERMISSIONS.actions)).stringList({
          nullable: false,
          description: 'What the caller may do to this document now, of update, delete, publish, unpublish (drafts) and restore_version (versions): decided as those calls decide',
          resolve: (d, _a, ctx) => documentActions(svc, ctx.actor, d),
        });
        for (const f of def.fields) {
          if (f.private || f.path.includes('.')) continue;
          fields[f.path] = scalarField(f.path, f.kind, f.items);
          const target = f.ref && f.kind === 'objectId' ? refs.get(f.ref) : undefined;
          const targetSvc = f.ref ? registry.get(f.ref) : undefined;
          if (target && targetSvc && def.populatable.includes(f.path)) {
            // Relation as an object: read through the related resource's own scope (tenant, guards, soft delete).
            fields[camel(f.path.replace(/_id$/, ''))] = t.withAuth(scopes(RESOURCE_PERMISSIONS.get)).field({
              type: target,
              resolve: async (d, _a, ctx) => {
                const v = d[f.path];
                if (v == null) return null;
                targetSvc.scope(ctx.actor); // a failed feature or attribute guard stays an error, as REST's populate
                try {
                  return await targetSvc.get(ctx.actor, idString(v)!);
                } catch (err) {
                  // As REST's populate: a related row outside the caller's rules, or of a resource it may not read, is null.
                  if (err instanceof NotFoundError || err instanceof AccessDeniedError) return null;
                  throw err;
                }
              },
            });
          }
        }
        return fields as never;
      },
    });

    versionsGraphQL(builder, svc, ref, versions);

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
    const offers = (op: Operation) => def.operations.has(op);
    // `draft` and `publish_at` on the writes of a drafts resource, as `?draft=true&publish_at=` on REST.
    const draftArgs = (arg: Arg): InputFieldMap => (def.drafts ? { draft: arg.boolean(), publish_at: arg({ type: 'DateTime' }) } : {});
    const writeOrDraft = (actor: Actor, id: string, ifMatch: string | null | undefined, input: unknown, replace: boolean, args: { draft?: unknown; publish_at?: unknown }) => {
      const draft = def.drafts ? draftOptionsOf(args) : null;
      return draft ? saveDraft(svc, actor, id, ifMatch, input, replace, draft) : svc.update(actor, id, ifMatch, input, replace);
    };
    builder.queryFields((t) => ({
      ...(offers('list') ? { [listName]: t.withAuth(scopes(RESOURCE_PERMISSIONS.list)).field({
        type: Page,
        nullable: false,
        description: `List ${def.name}; arguments mirror the REST query parameters`,
        args: listArgs(t.arg),
        resolve: async (_r, args, ctx) => {
          // `etag` (non-null) is computed from `version`: a `fields` projection keeps it.
          const res = await svc.listArgs(ctx.actor, args as ListArgs, { etags: true });
          return res.mode === 'cursor' ? { items: res.items, cursors: res.cursors } : res;
        },
      }) } : {}),
      ...(offers('get') ? { [oneName]: t.withAuth(scopes(RESOURCE_PERMISSIONS.get)).field({
        type: ref,
        args: { id: t.arg.id({ required: true }), include_deleted: t.arg.boolean(), ...(def.drafts ? { draft: t.arg.boolean({ description: 'The pending draft, where the caller may read it' }) } : {}) },
        resolve: async (_r, args, ctx) => (args.draft
          ? (await getWithDraft(svc, ctx.actor, String(args.id), args.include_deleted ? { include_deleted: 'true' } : {})).doc
          : svc.get(ctx.actor, String(args.id), { includeDeleted: !!args.include_deleted })),
      }) } : {}),
    }));
    builder.mutationFields((t) => ({
      ...(offers('create') ? { [`create${def.graphqlName}`]: t.withAuth(scopes(RESOURCE_PERMISSIONS.create)).field({
        type: ref, nullable: false, args: { input: t.arg({ type: 'JSON', required: true }), ...draftArgs(t.arg) },
        resolve: (_r, args, ctx) => svc.create(ctx.actor, args.input, { draft: def.drafts ? draftOptionsOf(args as { draft?: unknown }) : null }),
      }) } : {}),
      ...(offers('update') ? { [`update${def.graphqlName}`]: t.withAuth(scopes(RESOURCE_PERMISSIONS.update)).field({
        type: ref, nullable: false,
        args: { id: t.arg.id({ required: true }), if_match: t.arg.string(), input: t.arg({ type: 'JSON', required: true }), ...draftArgs(t.arg) },
        resolve: (_r, args, ctx) => writeOrDraft(ctx.actor, String(args.id), args.if_match, args.input, false, args as { draft?: unknown }),
      }) } : {}),
      ...(offers('replace') ? { [`replace${def.graphqlName}`]: t.withAuth(scopes(RESOURCE_PERMISSIONS.replace)).field({
        type: ref, nullable: false,
        args: { id: t.arg.id({ required: true }), if_match: t.arg.string(), input: t.arg({ type: 'JSON', required: true }), ...draftArgs(t.arg) },
        resolve: (_r, args, ctx) => writeOrDraft(ctx.actor, String(args.id), args.if_match, args.input, true, args as { draft?: unknown }),
      }) } : {}),
      ...(offers('delete') ? { [`delete${def.graphqlName}`]: t.withAuth(scopes(RESOURCE_PERMISSIONS.delete)).field({
        type: ref, nullable: false, description: 'Soft delete; returns the deleted document',
        args: { id: t.arg.id({ required: true }), if_match: t.arg.string() },
        resolve: (_r, args, ctx) => svc.remove(ctx.actor, String(args.id), args.if_match),
      }) } : {}),
      ...(offers('delete') ? { [`restore${def.graphqlName}`]: t.withAuth(scopes(RESOURCE_PERMISSIONS.restore)).field({
        type: ref, nullable: false, description: 'Restore a soft-deleted document (administrators); returns it',
        args: { id: t.arg.id({ required: true }), if_match: t.arg.string() },
        resolve: (_r, args, ctx) => svc.restore(ctx.actor, String(args.id), args.if_match),
      }) } : {}),
      ...(def.drafts && offers('update') ? {
        [`publish${def.graphqlName}`]: t.withAuth(scopes(RESOURCE_PERMISSIONS.publish)).field({
          type: ref, nullable: false, description: 'Publish the pending draft (publish permission); returns the document',
          args: { id: t.arg.id({ required: true }), if_match: t.arg.string() },
          resolve: (_r, args, ctx) => publishDraft(svc, ctx.actor, String(args.id), args.if_match),
        }),
        [`unpublish${def.graphqlName}`]: t.withAuth(scopes(RESOURCE_PERMISSIONS.unpublish)).field({
          type: ref, nullable: false, description: 'Withdraw the document from readers without read_drafts (publish permission)',
          args: { id: t.arg.id({ required: true }), if_match: t.arg.string() },
          resolve: (_r, args, ctx) => unpublish(svc, ctx.actor, String(args.id), args.if_match),
        }),
      } : {}),
    }));
  }
}

