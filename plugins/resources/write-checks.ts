/**
 * Checks of a create, update or replace body against the actor's access and the other
 * resources: relation ids must name documents the actor can see in the target tenant, and
 * attribute-guarded fields must stay within the actor's values.
 */
import { Types } from 'mongoose';
import type { Actor } from '../../core/context.ts';
import { AccessDeniedError, ValidationError, type ValidationIssue } from '../../core/errors.ts';
import type { Doc } from '../../core/hooks.ts';
import type { Filter } from '../../core/access.ts';
import type { ResourceDefinition } from './define.ts';
import type { ResourceCore } from './service-types.ts';

export type { FileReferenceChecker } from './service-types.ts';

/**
 * Relation values must point at documents the actor can see (live, guards pass) in the tenant the
 * document is written to (a system actor without `X-Tenant-Id` sees every tenant but writes to one).
 */
export async function checkReferences(svc: ResourceCore, actor: Actor, data: Doc, loc: (string | number)[], tenantId: string | null): Promise<void> {
  const issues: ValidationIssue[] = [];
  for (const f of svc.def.fields) {
    if (!f.ref || f.kind !== 'objectId') continue;
    const value = data[f.path];
    if (value === undefined || value === null) continue;
    const target = svc.deps.lookup.get(f.ref);
    if (!target) continue;
    const sameTenant = target.def.tenant_scoped && tenantId && svc.deps.tenancy.enabled ? { tenant_id: new Types.ObjectId(tenantId) } : {};
    const found = await target.model.exists({ _id: value as Types.ObjectId, ...target.scope(actor), ...sameTenant });
    if (!found) issues.push({ loc: [...loc, f.path], msg: `No ${f.ref} document with this id`, type: 'reference_not_found' });
    else if (f.file) {
      const checker = svc.deps.files?.();
      const issue = checker ? await checker.check(tenantId, new Types.ObjectId(String(value)), f.file) : { msg: 'Files are not enabled', type: 'file_not_ready' };
      if (issue) issues.push({ loc: [...loc, f.path], ...issue });
    }
  }
  if (issues.length) throw new ValidationError(issues);
}

/**
 * A field restricted by an attribute rule and left out of a create takes the actor's value, so
 * the creator can still see what it created. With several allowed values it must be given.
 */
export function fillGuardedFields(def: ResourceDefinition, scope: Filter, data: Doc): void {
  for (const rule of def.guards.attributes) {
    if (!('field' in rule) || data[rule.field] !== undefined) continue;
    const allowed = scope[rule.field];
    if (allowed === undefined) continue;
    if (allowed && typeof allowed === 'object' && '$in' in allowed) {
      throw new ValidationError([{ loc: ['body', rule.field], msg: `Required: one of your ${rule.attribute} values`, type: 'missing' }]);
    }
    data[rule.field] = allowed;
  }
}

/** A write must stay inside the actor's attribute filter (e.g. its own region). */
export function checkWritable(scope: Filter, data: Doc): void {
  for (const [field, rule] of Object.entries(scope)) {
    if (field === 'tenant_id' || field === 'is_deleted' || !(field in data)) continue;
    const allowed = rule && typeof rule === 'object' && '$in' in rule ? (rule.$in as unknown[]) : [rule];
    if (!allowed.some((a) => a === data[field])) throw new AccessDeniedError(`You may not write ${field} = ${String(data[field])}`, { field });
  }
}
