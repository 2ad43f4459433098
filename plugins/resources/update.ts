/**
 * PATCH and PUT of a resource document. Two paths with the same answers, the same events and the
 * same order of errors (guards 403, If-Match 428, body 422, lookup 404, revision 412, then the
 * body's checks against the document): a read and a conditional write, or, when nothing before the
 * write needs the document, one update pipeline that builds the outbox from the document itself
 * (bench/history/performance.md, "The update in one command"). No Koa or GraphQL here.
 */
import { Types } from 'mongoose';
import type { Actor } from '../../core/context.ts';
import { EtagMismatchError, parseInput } from '../../core/errors.ts';
import { etagOf, parseIfMatch } from '../../lib/etag.ts';
import { OUTBOX_FIELD } from '../events/public/outbox.ts';
import type { Doc } from '../../core/hooks.ts';
import type { Filter } from '../../core/access.ts';
import { stageChange } from './events.ts';
import type { ResourceCore } from './service-types.ts';
import { checkReferences, checkWritable } from './write-checks.ts';
import { updatedDoc, withRows, writeAccess, writtenFields } from './access.ts';
import { draftFields, type DraftOptions } from './drafts/fields.ts';

/** `$set` and `$unset` of an update or a replace with `data` (a replace resets what `data` leaves out). */
function changes(svc: ResourceCore, actor: Actor, data: Doc, replace: boolean): { set: Doc; unset: Record<string, 1> } {
  const set: Doc = { updated_at: new Date(), updated_by: svc.actorId(actor) };
  const unset: Record<string, 1> = {};
  if (replace) {
    // Defaults where the schema has them, else nothing.
    const full = svc.plain.build(data, false) ?? (new svc.model(data).toObject() as Doc);
    for (const p of svc.clientPaths) {
      if (full[p] === undefined) unset[p] = 1;
      else set[p] = full[p];
    }
  } else Object.assign(set, data);
  return { set, unset };
}

/**
 * The fields of the view an update changes: its entry keeps their values before the write, not the
 * whole document (docs/events.md, "Relayed entries without an object stay").
 */
const changedKeys = (svc: ResourceCore, set: Doc, unset: Record<string, 1>): string[] =>
  svc.shownKeys(new Set([...Object.keys(set), ...Object.keys(unset), 'version']));

/** What an update writes besides its body. */
export interface UpdateOptions {
  /** The version a restore brings back: its event records it (`meta.restored_version`). */
  restoredVersion?: number;
  /** A draft save of a document not published (drafts/): it stays a draft. Without it a drafts resource's update publishes. */
  draft?: DraftOptions | null;
}

/** PATCH (`replace: false`) or PUT (`replace: true`), guarded by `If-Match` in the same atomic update. */
export async function updateDocument(svc: ResourceCore, actor: Actor, id: string, ifMatch: string | null | undefined, body: unknown, replace: boolean, opts: UpdateOptions = {}): Promise<Doc> {
  const wa = await writeAccess(svc, actor, 'update');
  const base = withRows(svc.scope(actor), wa?.rows);
  const scope = withRows(base, await svc.draftRows(actor));
  // The drafts rule's rows hold only values built with their stored types (ids, booleans), as the
  // scope's own terms do: whether mongoose must cast the filter is the rest's question.
  const plain = !svc.needsCasting(base);
  const tags = parseIfMatch(ifMatch);
  const input = parseInput(replace ? svc.def.inputs.replace : svc.def.inputs.update, body, ['body']) as Doc;
  // A rule decides on the stored document, and a draft save on its state: the read path.
  const version = wa || opts.draft ? null : oneCommandVersion(svc, tags, input, replace, base);
  if (version !== null) {
    const done = await updateInOneCommand(svc, actor, id, base, scope, version, input, replace, opts);
    if (done) return done;
  }
  const old = await svc.findOwned(id, scope, plain);
  if (!tags.includes(etagOf(old.version))) throw new EtagMismatchError();
  if (wa) Object.assign(input, wa.decide({ old, written: writtenFields(svc, old, input, replace), input, result: (p) => ({ ...updatedDoc(svc, old, input, replace), ...p }) }));
  const tenantId = old.tenant_id ? String(old.tenant_id) : null;
  const ev = await svc.deps.hooks.runBefore('BEFORE_UPDATE', { ...svc.event(actor, tenantId, false), id, data: input, old, replace });
  checkWritable(scope, ev.data);
  await checkReferences(svc, actor, ev.data, ['body'], tenantId);
  // An empty PATCH changes nothing: no new revision, no events.
  if (!replace && Object.keys(ev.data).length === 0) return svc.view(old);
  const { set, unset } = changes(svc, actor, ev.data, replace);
  Object.assign(set, draftFields(svc, actor, opts.draft));
  const verb = opts.draft ? 'draft_saved' : svc.def.drafts && old._published === false ? 'published' : 'updated';
  // An update's view before and after differ only in what it writes (a publish or a draft changes more).
  const changed = verb === 'updated' ? { changed: changedKeys(svc, set, unset) } : {};
  set[OUTBOX_FIELD] = svc.outboxFor(verb, actor, old, { replace, ...changed, ...(opts.restoredVersion !== undefined ? { restoredVersion: opts.restoredVersion } : {}) });
  const doc = await svc.plain.updateIf({ _id: old._id, ...scope, version: old.version }, plain, set, unset);
  if (!doc) throw await svc.lostRace(id, scope);
  await svc.committed(doc);
  return svc.view(doc);
}

/**
 * The revision an update can be written for in one command, or null when something before the write
 * needs the document: a `BEFORE_UPDATE` handler for this resource (it receives `old`), an empty
 * PATCH (answered from the document, nothing written), an `If-Match` other than one strong or weak
 * tag (`*`, a list), a filter or fields mongoose must cast, or a reference to check in a tenant the
 * scope does not name.
 */
function oneCommandVersion(svc: ResourceCore, tags: string[], input: Doc, replace: boolean, scope: Filter): number | null {
  const m = tags.length === 1 ? /^"(\d+)"$/.exec(tags[0]!) : null;
  if (!m || (!replace && Object.keys(input).length === 0)) return null;
  if (svc.deps.hooks.hasListeners('BEFORE_UPDATE', svc.def.name) || svc.hidesPaths || svc.needsCasting(scope)) return null;
  for (const k of Object.keys(input)) if (k.includes('.')) return null;
  const references = svc.def.fields.some((f) => f.ref && input[f.path] !== undefined && input[f.path] !== null);
  if (references && svc.def.tenant_scoped && !(scope.tenant_id instanceof Types.ObjectId)) return null;
  return Number(m[1]);
}

/**
 * The update as one pipeline; undefined when mongoose must cast a value or, with drafts, when nothing
 * matched (nothing written either way: take the read path). `base` is the scope without the drafts
 * rule, `scope` with it.
 */
async function updateInOneCommand(svc: ResourceCore, actor: Actor, id: string, base: Filter, scope: Filter, version: number, input: Doc, replace: boolean, opts: UpdateOptions): Promise<Doc | undefined> {
  const _id = svc.oid(id);
  try {
    checkWritable(scope, input);
    await checkReferences(svc, actor, input, ['body'], base.tenant_id instanceof Types.ObjectId ? String(base.tenant_id) : null);
  } catch (err) {
    // The read path answers 404 and 412 before the body's checks: so does this one.
    const old = await svc.findOwned(id, scope, true);
    if (old.version !== version) throw new EtagMismatchError();
    throw err;
  }
  const { set, unset } = changes(svc, actor, input, replace);
  // With drafts, only a published document is updated here: every caller reads it (the drafts rule
  // holds), the write publishes nothing, and its event is `updated` with the published view
  // (`viewExpression`). A document not published, stale or missing takes the read path, which
  // tells them apart.
  const drafts = svc.def.drafts;
  if (drafts) Object.assign(set, draftFields(svc, actor, null));
  const entry = stageChange(svc, 'updated', actor, { version: version + 1, previous: null, tenantId: null, replace, ...opts });
  const outbox = svc.deps.events.outbox.inWrite(svc.source, _id, entry, svc.viewExpression, changedKeys(svc, set, unset));
  const filter = drafts ? { _id, ...base, _published: { $ne: false } } : { _id, ...scope };
  const written = await svc.plain.updateComputedIf(filter, set, unset, version, { [OUTBOX_FIELD]: outbox.expression });
  if (written === undefined || (!written && drafts)) return undefined;
  if (!written) throw await svc.lostRace(id, scope);
  const old = written.before;
  // The document as stored, from the one before it: what `returnDocument: 'after'` would answer.
  const doc: Doc = { ...old, ...written.set, [OUTBOX_FIELD]: outbox.applied(old) };
  for (const k of Object.keys(unset)) delete doc[k];
  await svc.committed(doc);
  return svc.view(doc);
}
