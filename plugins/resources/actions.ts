/**
 * What the caller may do, of the actions a client offers as buttons: to a resource at all, `create`
 * and `delete`; to one document now, `update` and `delete` (every resource), `publish` and
 * `unpublish` (resources with drafts), `restore_version` (resources that keep versions). Each is
 * decided with the scope its own call uses (tenant, guards, the caller's access rules or, without
 * rules, the built-in rule of administrators and authors) and the document's state, so a client
 * offering only these offers nothing the server refuses for want of a right; an `If-Match` or a
 * unique value can still refuse the call. No Koa or GraphQL here.
 */
import { AccessDeniedError } from '../../core/errors.ts';
import type { Actor } from '../../core/context.ts';
import type { Doc } from '../../core/hooks.ts';
import type { Filter } from '../../core/access.ts';
import { withRows, writeAccess } from './access.ts';
import { publishScope } from './drafts/service.ts';
import type { ResourceService } from './service.ts';

/** An action {@link documentActions} answers for. */
export type DocumentAction = 'update' | 'delete' | 'publish' | 'unpublish' | 'restore_version';

/** `p`, or null when the caller's roles refuse the action outright. */
const unlessDenied = <T>(p: Promise<T>): Promise<T | null> => p.catch((err: unknown) => {
  if (err instanceof AccessDeniedError) return null;
  throw err;
});

/** The scope of an update or a delete (a restore of a version is an update), as those calls build it. */
async function writeScope(svc: ResourceService, actor: Actor, action: 'update' | 'delete'): Promise<Filter> {
  const wa = await writeAccess(svc, actor, action);
  return withRows(withRows(svc.scope(actor), wa?.rows), await svc.draftRows(actor));
}

/**
 * The actions of {@link DocumentAction} that `actor` may take on document `doc` now, in that order:
 * one `exists` query per action the resource has and the caller's roles allow at all.
 */
export async function documentActions(svc: ResourceService, actor: Actor, doc: Doc): Promise<DocumentAction[]> {
  const checks: [DocumentAction, Filter][] = [];
  const update = await unlessDenied(writeScope(svc, actor, 'update'));
  if (update) checks.push(['update', update]);
  const remove = await unlessDenied(writeScope(svc, actor, 'delete'));
  if (remove) checks.push(['delete', remove]);
  if (svc.def.drafts) {
    const scope = await unlessDenied(publishScope(svc, actor));
    if (scope) {
      checks.push(['publish', withRows(scope, { $or: [{ _published: false }, { _draft: { $ne: null } }] })]);
      checks.push(['unpublish', withRows(scope, { _published: { $ne: false } })]);
    }
  }
  if (svc.def.versions && update) checks.push(['restore_version', update]);
  const allowed = await Promise.all(checks.map(async ([, filter]) => !!(await svc.model.exists({ ...filter, _id: doc._id }))));
  return checks.filter((_, i) => allowed[i]).map(([action]) => action);
}

/** An action {@link resourceActions} answers for. */
export type ResourceAction = 'create' | 'delete';

/**
 * The actions of {@link ResourceAction} the resource has and `actor` may take on it at all, in that
 * order: `create` a document, and `delete` one (one by one or in bulk). Decided as those calls decide
 * before they look at a document or a value: the resource's guards (tenant, features, attributes)
 * and the caller's roles. A rule on rows or fields can still refuse a given document or value: what
 * the caller may do to one document is {@link documentActions}'s answer.
 */
export async function resourceActions(svc: ResourceService, actor: Actor): Promise<ResourceAction[]> {
  try {
    svc.scope(actor);
  } catch (err) {
    if (err instanceof AccessDeniedError) return [];
    throw err;
  }
  const actions = ['create', 'delete'] as const;
  const may = async (action: ResourceAction) =>
    svc.def.operations.has(action) && (await unlessDenied(Promise.resolve(writeAccess(svc, actor, action)).then(() => true))) !== null;
  const allowed = await Promise.all(actions.map(may));
  return actions.filter((_, i) => allowed[i]);
}
