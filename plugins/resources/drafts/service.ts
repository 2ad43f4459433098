/**
 * Drafts of a resource with `drafts: true` (docs/versions.md#drafts). The top-level fields of a
 * document are its published state, so every read path works unchanged for readers without
 * `read_drafts`; a pending draft is `_draft: {values, author, saved_at, publish_at}` in the same
 * document, and a document never published (or withdrawn) is marked `_published: false` and holds
 * its working copy in the top-level fields, hidden by {@link draftsReadRows}. No Koa or GraphQL here.
 */
import { AccessDeniedError, ConflictError, EtagMismatchError, parseInput } from '../../../core/errors.ts';
import { etagOf, parseIfMatch } from '../../../lib/etag.ts';
import { OUTBOX_FIELD } from '../../events/public/outbox.ts';
import { isAdmin, type Actor } from '../../../core/context.ts';
import type { Doc } from '../../../core/hooks.ts';
import type { Filter } from '../../../core/access.ts';
import { castRows, maskWritten, withRows, writeAccess, writtenFields, updatedDoc } from '../access.ts';
import { draftFields, type DraftOptions, type StoredDraft } from './fields.ts';
import type { ResourceService } from '../service.ts';
import type { RawQuery } from '../params.ts';
import type { ResourceCore } from '../service-types.ts';
import { checkReferences, checkWritable } from '../write-checks.ts';
import { updateDocument } from '../update.ts';

/**
 * The rows of `action` (`read_drafts`, `publish`) the caller holds: null every row, false none.
 * Under access rules the actions' grants decide; without rules administrators hold every row and
 * others the drafts they authored (and, to unpublish, the documents without a draft they created).
 */
export async function draftRows(svc: ResourceCore, actor: Actor, action: 'read_drafts' | 'publish'): Promise<Filter | null | false> {
  const access = svc.deps.access?.();
  if (access) {
    try {
      const wa = await access.write(actor, svc.def.name, action);
      if (wa) return wa.rows ? castRows(svc, wa.rows) : null;
    } catch (err) {
      if (err instanceof AccessDeniedError) return false;
      throw err;
    }
  }
  if (isAdmin(actor)) return null;
  const me = svc.actorId(actor);
  // Unpublishing a document without a draft falls to its creator.
  return action === 'read_drafts' ? { '_draft.author': me } : { $or: [{ '_draft.author': me }, { _draft: null, created_by: me }] };
}

/** What every read and write of a drafts resource adds to its filter: documents not published only where the caller may read drafts. Null: nothing. */
export async function draftsReadRows(svc: ResourceCore, actor: Actor): Promise<Filter | null> {
  if (!svc.def.drafts) return null;
  const rows = await draftRows(svc, actor, 'read_drafts');
  if (rows === null) return null;
  const published = { _published: { $ne: false } };
  return rows === false ? published : { $or: [published, rows] };
}

/** `doc` with its pending draft laid over the published fields (`_status: 'draft'`). */
export function withDraft(svc: ResourceService, doc: Doc): Doc {
  const draft = doc._draft as StoredDraft | null | undefined;
  const out = svc.view(doc);
  if (!draft?.values) return out;
  for (const p of svc.clientPaths) delete out[p];
  return { ...out, ...draft.values, _status: 'draft' };
}

/**
 * GET with `?draft=true`: the document with its pending draft over it, where the caller may read
 * that draft; otherwise as a plain GET answers it. `fields`, `populate` and `include_deleted` apply
 * as on a plain GET, to the draft's values.
 */
export async function getWithDraft(svc: ResourceService, actor: Actor, id: string, query: RawQuery = {}): Promise<{ doc: Doc; etag: string }> {
  const q = svc.parse({ fields: query.fields, populate: query.populate, include_deleted: query.include_deleted });
  const opts = { includeDeleted: q.includeDeleted };
  // The plain read checks the caller's access, fields and populate paths first, and gives the ETag.
  const read = await svc.read(actor, id, { ...opts, fields: q.fields, populate: q.populate });
  const rows = await draftRows(svc, actor, 'read_drafts');
  if (rows === false) return read;
  const raw = await svc.model.findOne(withRows({ _id: svc.oid(id), ...svc.scope(actor, opts) }, rows)).lean<Doc>();
  if (!(raw?._draft as StoredDraft | null | undefined)?.values) return read;
  const merged = await maskWritten(svc, actor, withDraft(svc, raw!));
  const picked = q.fields ? pickFields(merged, ['_id', ...q.fields]) : merged;
  const [doc] = q.populate.length ? await svc.populate(actor, [picked], q.populate) : [picked];
  return { doc: doc!, etag: read.etag };
}

/** The fields of `doc` named by `paths` (dotted paths reach into sub-documents), as a projection keeps them. */
function pickFields(doc: Doc, paths: readonly string[]): Doc {
  const out: Doc = {};
  for (const path of paths) {
    const parts = path.split('.');
    let from: unknown = doc;
    for (const p of parts) from = from && typeof from === 'object' ? (from as Doc)[p] : undefined;
    if (from === undefined) continue;
    let to = out;
    for (const p of parts.slice(0, -1)) to = (to[p] ??= {}) as Doc;
    to[parts.at(-1)!] = from;
  }
  return out;
}

/**
 * PATCH or PUT with `?draft=true`. A document not published is updated in place (it stays a draft);
 * a published one keeps its fields and gets the draft's full client state in `_draft.values`.
 * The same checks as an update (If-Match, body, write rules, references); one write with its event
 * (`<resource>.draft_saved`, whose object is the published document).
 */
export async function saveDraft(svc: ResourceService, actor: Actor, id: string, ifMatch: string | null | undefined, body: unknown, replace: boolean, draft: DraftOptions): Promise<Doc> {
  const wa = await writeAccess(svc, actor, 'update');
  const scope = withRows(withRows(svc.scope(actor), wa?.rows), await draftsReadRows(svc, actor));
  const tags = parseIfMatch(ifMatch);
  const input = parseInput(replace ? svc.def.inputs.replace : svc.def.inputs.update, body, ['body']) as Doc;
  const old = await svc.findOwned(id, scope);
  if (!tags.includes(etagOf(old.version))) throw new EtagMismatchError();
  if (old._published === false) return updateDocument(svc, actor, id, ifMatch, body, replace, { draft });
  // A pending draft the caller may not read is replaced, never merged into (its values would come back in the answer).
  const pending = (old._draft as StoredDraft | null)?.values;
  const current = pending && (await mayReadDraft(svc, actor, old)) ? { ...old, ...pending } : old;
  if (wa) Object.assign(input, wa.decide({ old: current, written: writtenFields(svc, current, input, replace), input, result: (p) => ({ ...updatedDoc(svc, current, input, replace), ...p }) }));
  checkWritable(scope, input);
  const tenantId = old.tenant_id ? String(old.tenant_id) : null;
  await checkReferences(svc, actor, input, ['body'], tenantId);
  const base = replace ? {} : Object.fromEntries(svc.clientPaths.filter((p) => current[p] !== undefined).map((p) => [p, current[p]]));
  const values = { ...base, ...input };
  const doc = await svc.model
    .findOneAndUpdate(
      { _id: old._id, ...scope, version: old.version },
      { $set: { ...draftFields(svc, actor, draft, values), updated_at: new Date(), updated_by: svc.actorId(actor), [OUTBOX_FIELD]: svc.outboxFor('draft_saved', actor, old) }, $inc: { version: 1 } },
      { returnDocument: 'after' },
    )
    .lean<Doc>();
  if (!doc) throw await svc.lostRace(id, scope);
  await svc.committed(doc);
  return maskWritten(svc, actor, withDraft(svc, doc));
}

/** Whether `actor` holds `read_drafts` on the stored document `doc`. */
async function mayReadDraft(svc: ResourceService, actor: Actor, doc: Doc): Promise<boolean> {
  const rows = await draftRows(svc, actor, 'read_drafts');
  return rows === null || (rows !== false && !!(await svc.model.exists({ _id: doc._id, ...rows })));
}

/** The scope of a publish or unpublish: the caller's `publish` rows. @throws AccessDeniedError when it holds none */
export async function publishScope(svc: ResourceService, actor: Actor): Promise<Filter> {
  const rows = await draftRows(svc, actor, 'publish');
  if (rows === false) throw new AccessDeniedError(`Your roles do not allow publish on ${svc.def.name}`, { resource: svc.def.name, action: 'publish' });
  return withRows(withRows(svc.scope(actor), rows), await draftsReadRows(svc, actor));
}

/**
 * `POST …/{id}/publish` + If-Match: the pending draft becomes the document (`<resource>.published`).
 * @throws ConflictError when nothing is pending, or a `unique` value of the draft is held by another document
 */
export async function publishDraft(svc: ResourceService, actor: Actor, id: string, ifMatch: string | null | undefined): Promise<Doc> {
  const scope = await publishScope(svc, actor);
  const tags = parseIfMatch(ifMatch);
  const old = await svc.findOwned(id, scope);
  if (!tags.includes(etagOf(old.version))) throw new EtagMismatchError();
  if (old._published !== false && !old._draft) throw new ConflictError(`${svc.def.name} ${id} has no draft to publish`);
  const doc = await writePublish(svc, actor, old, scope);
  if (!doc) throw await svc.lostRace(id, scope);
  return maskWritten(svc, actor, svc.view(doc));
}

/**
 * The publish write of `old` at its revision: its draft's values (when pending) into the top-level
 * fields, `_published: true`, no draft. Null when the document moved on (another writer, another replica).
 */
export async function writePublish(svc: ResourceService, actor: Actor | null, old: Doc, scope: Filter, extra: Filter = {}): Promise<Doc | null> {
  const values = (old._draft as StoredDraft | null)?.values ?? null;
  await checkUnique(svc, old, values);
  const set: Doc = { ...(values ?? {}), _published: true, _draft: null, updated_at: new Date(), updated_by: svc.actorId(actor) };
  const unset = values ? Object.fromEntries(svc.clientPaths.filter((p) => !p.includes('.') && values[p] === undefined).map((p) => [p, 1 as const])) : {};
  set[OUTBOX_FIELD] = svc.outboxFor('published', actor, old);
  const doc = await svc.model
    .findOneAndUpdate({ _id: old._id, ...scope, ...extra, version: old.version }, { $set: set, $unset: unset, $inc: { version: 1 } }, { returnDocument: 'after' })
    .lean<Doc>();
  if (doc) await svc.committed(doc);
  return doc;
}

/** A draft value of a `unique` field held by another document of the tenant: 409 before anything is written. */
async function checkUnique(svc: ResourceService, old: Doc, values: Doc | null): Promise<void> {
  if (!values) return;
  for (const p of svc.clientPaths) {
    if (!(svc.model.schema.path(p)?.options as { unique?: unknown } | undefined)?.unique || values[p] == null || values[p] === old[p]) continue;
    if (await svc.model.exists({ ...(svc.def.tenant_scoped ? { tenant_id: old.tenant_id ?? null } : {}), [p]: values[p], _id: { $ne: old._id } })) {
      throw new ConflictError(`The draft cannot be published: another document holds its ${p}`, { field: p });
    }
  }
}

/**
 * `POST …/{id}/unpublish` + If-Match: readers without `read_drafts` no longer see the document (404);
 * its fields stay as the working copy, a pending draft stays pending (`<resource>.unpublished`).
 * @throws ConflictError when the document is not published
 */
export async function unpublish(svc: ResourceService, actor: Actor, id: string, ifMatch: string | null | undefined): Promise<Doc> {
  const scope = await publishScope(svc, actor);
  const tags = parseIfMatch(ifMatch);
  const old = await svc.findOwned(id, scope);
  if (!tags.includes(etagOf(old.version))) throw new EtagMismatchError();
  if (old._published === false) throw new ConflictError(`${svc.def.name} ${id} is not published`);
  const draft = (old._draft as StoredDraft | null) ?? draftFields(svc, actor, { publishAt: null })._draft;
  const doc = await svc.model
    .findOneAndUpdate(
      { _id: old._id, ...scope, version: old.version },
      { $set: { _published: false, _draft: draft, updated_at: new Date(), updated_by: svc.actorId(actor), [OUTBOX_FIELD]: svc.outboxFor('unpublished', actor, old) }, $inc: { version: 1 } },
      { returnDocument: 'after' },
    )
    .lean<Doc>();
  if (!doc) throw await svc.lostRace(id, scope);
  await svc.committed(doc);
  return maskWritten(svc, actor, withDraft(svc, doc));
}

/**
 * Publishes every draft whose `publish_at` has come, in the actor's scope (the `publish_drafts`
 * job). Each is one conditional write on the document's revision and its `publish_at`, so two
 * replicas running at once publish each draft once: the second finds the revision gone.
 * A draft whose unique value is taken stays a draft (counted in `conflicts`).
 */
export async function publishDue(svc: ResourceService, actor: Actor, now = new Date()): Promise<{ published: number; conflicts: number }> {
  if (!svc.def.drafts) return { published: 0, conflicts: 0 };
  const due = { ...svc.scope(actor), '_draft.publish_at': { $lte: now } };
  let published = 0;
  let conflicts = 0;
  for (const old of await svc.model.find(due).limit(1000).lean<Doc[]>()) {
    try {
      if (await writePublish(svc, null, old, svc.scope(actor), { '_draft.publish_at': { $lte: now } })) published++;
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
      conflicts++;
    }
  }
  return { published, conflicts };
}
