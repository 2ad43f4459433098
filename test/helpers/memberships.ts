import { randomBytes } from 'node:crypto';
import { Types } from 'mongoose';
import { ADMIN_KEY, type TestApp } from './app.ts';
import { systemActor } from '../../core/context.ts';

/**
 * Gives the person of `userId` a membership in another tenant (a new one unless `tenantId`), with
 * an API key, as an accepted invitation does; returns it like `createTenantUser`. Set-up only: the
 * invitations tests cover the HTTP way there.
 */
export async function addMembership(
  t: TestApp,
  userId: string,
  opts: { tenantId?: string; roles?: string[]; features?: string[]; attributes?: Record<string, unknown> } = {},
) {
  let tenantId = opts.tenantId;
  if (!tenantId) {
    const tr = await t.http('POST', '/admin/tenants', { key: ADMIN_KEY, json: { name: `m-${randomBytes(3).toString('hex')}` } });
    if (tr.status !== 201) throw new Error(`tenant: ${tr.status} ${JSON.stringify(tr.body)}`);
    tenantId = tr.body.id as string;
  }
  const person = await t.app.services.get('memberships').personOfUser(userId);
  if (!person) throw new Error(`no person for ${userId}`);
  const owner = (await t.http('GET', `/admin/users?per_page=500`, { key: ADMIN_KEY })).body.items.find((u: { id: string }) => u.id === userId);
  const user = await t.app.services.get('identity').createUser(
    systemActor(tenantId),
    { email: owner.email, name: owner.name, tenant_id: tenantId, roles: opts.roles ?? ['user'], features: opts.features ?? [], attributes: opts.attributes ?? {} },
    { person_id: new Types.ObjectId(person) },
  );
  const kr = await t.http('POST', '/admin/api-keys', { key: ADMIN_KEY, json: { user_id: user.id, name: 'membership' } });
  if (kr.status !== 201) throw new Error(`key: ${kr.status} ${JSON.stringify(kr.body)}`);
  return { tenantId, userId: user.id, key: kr.body.key as string, keyId: kr.body.id as string, email: owner.email as string };
}
