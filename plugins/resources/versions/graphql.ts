import type { Builder, ItemRef } from '../../../core/graphql.ts';
import { scopes } from '../../../core/graphql.ts';
import { parseInput } from '../../../core/errors.ts';
import type { Doc } from '../../../core/hooks.ts';
import { RESOURCE_PERMISSIONS, type ResourceService } from '../service.ts';
import type { VersionDiff, VersionEntry, VersionPage, VersionView, Versions } from './service.ts';
import { historyQuery } from './rest.ts';

/** A resource's object type (this file builds no Pothos type of its own by name). */
type ResourceRef = ItemRef<Doc>;
type Shared = ReturnType<typeof makeShared>;
const shared = new WeakMap<Builder, Shared>();

/** The types every versioned resource shares, made once per schema. */
function sharedTypes(builder: Builder): Shared {
  let out = shared.get(builder);
  if (!out) shared.set(builder, (out = makeShared(builder)));
  return out;
}

function makeShared(builder: Builder) {
  const entry = builder.objectRef<VersionEntry>('ResourceVersionEntry').implement({
    description: 'A version of a document, without the document',
    fields: (t) => ({
      version: t.exposeInt('version', { nullable: false }),
      operation: t.exposeString('operation', { nullable: false, description: 'created, updated, deleted or restored; with drafts also draft_saved, published or unpublished' }),
      created_at: t.field({ type: 'DateTime', nullable: false, resolve: (v) => v.created_at }),
      actor: t.exposeString('actor', { nullable: true, description: 'User id of whoever made the write; null for the system' }),
      request_id: t.exposeString('request_id', { nullable: true }),
      changed_fields: t.exposeStringList('changed_fields', { nullable: false }),
      restored_from: t.exposeInt('restored_from', { nullable: true, description: 'The version this write restored, if it was a restore' }),
    }),
  });
  const page = builder.objectRef<VersionPage>('ResourceVersionPage').implement({
    description: 'A page of a document\'s history, newest first',
    fields: (t) => ({
      items: t.field({ type: [entry], nullable: false, resolve: (p) => p.items }),
      next_before: t.exposeInt('next_before', { nullable: true, description: 'Pass as before for the next (older) page; null when no older version is kept' }),
    }),
  });
  const change = builder.objectRef<VersionDiff['changes'][number]>('ResourceVersionChange').implement({
    fields: (t) => ({
      field: t.exposeString('field', { nullable: false }),
      before: t.field({ type: 'JSON', resolve: (c) => c.before as never }),
      after: t.field({ type: 'JSON', resolve: (c) => c.after as never }),
    }),
  });
  const diff = builder.objectRef<VersionDiff>('ResourceVersionDiff').implement({
    description: 'Field-by-field changes between two versions of a document',
    fields: (t) => ({
      version: t.exposeInt('version', { nullable: false }),
      against: t.exposeInt('against', { nullable: true, description: 'The version compared against; null when there is none before' }),
      changes: t.field({ type: [change], nullable: false, resolve: (d) => d.changes }),
    }),
  });
  return { entry, page, diff };
}

const idOf = (d: unknown) => String((d as Doc)._id);

/**
 * A versioned resource's history in GraphQL: `versions`, `versionAt(n)` and `versionDiff(n, against)`
 * on its type, and `restore<Type>Version`; the same service, rules and errors as REST.
 */
export function versionsGraphQL(builder: Builder, svc: ResourceService, ref: ResourceRef, versions: Versions): void {
  const { def } = svc;
  if (!def.versions) return;
  const { page, diff } = sharedTypes(builder);
  const view = builder.objectRef<VersionView>(`${def.graphqlName}Version`).implement({
    description: `A version of a document of ${def.name}: the document as it was, masked by the caller's read rules`,
    fields: (t) => ({
      version: t.exposeInt('version', { nullable: false }),
      operation: t.exposeString('operation', { nullable: false }),
      created_at: t.field({ type: 'DateTime', nullable: false, resolve: (v) => v.created_at }),
      actor: t.exposeString('actor', { nullable: true }),
      request_id: t.exposeString('request_id', { nullable: true }),
      changed_fields: t.exposeStringList('changed_fields', { nullable: false }),
      restored_from: t.exposeInt('restored_from', { nullable: true }),
      document: t.field({ type: ref, nullable: false, resolve: (v) => v.document as never }),
    }),
  });
  builder.objectFields(ref, (t) => ({
    versions: t.withAuth(scopes(RESOURCE_PERMISSIONS.history)).field({
      type: page, nullable: false, description: 'History of this document, newest first, without the documents',
      args: { limit: t.arg.int(), before: t.arg.int() },
      resolve: (d, args, ctx) => versions.history(svc, ctx.actor, idOf(d), parseInput(historyQuery, { limit: args.limit ?? undefined, before: args.before ?? undefined })),
    }),
    versionAt: t.withAuth(scopes(RESOURCE_PERMISSIONS.version)).field({
      type: view, description: 'Version n of this document',
      args: { n: t.arg.int({ required: true }) },
      resolve: (d, args, ctx) => versions.at(svc, ctx.actor, idOf(d), args.n),
    }),
    versionDiff: t.withAuth(scopes(RESOURCE_PERMISSIONS.diff)).field({
      type: diff, description: 'Field-by-field changes from version `against` (default: the one before) to version n',
      args: { n: t.arg.int({ required: true }), against: t.arg.int() },
      resolve: (d, args, ctx) => versions.diff(svc, ctx.actor, idOf(d), args.n, args.against ?? undefined),
    }),
  }));
  builder.mutationField(`restore${def.graphqlName}Version`, (t) =>
    t.withAuth(scopes(RESOURCE_PERMISSIONS.restoreVersion)).field({
      type: ref, nullable: false, description: 'Write version n\'s fields back as a new version (same rules as a replace); returns the document',
      args: { id: t.arg.id({ required: true }), n: t.arg.int({ required: true }), if_match: t.arg.string() },
      resolve: (_r, args, ctx) => versions.restore(svc, ctx.actor, String(args.id), args.n, args.if_match) as never,
    }),
  );
}
