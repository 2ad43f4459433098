import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import mongoose from 'mongoose';
import { buildTestApp, createTenantUser, envelope, uniqueDbUri, type TestApp } from '../helpers/app.ts';

type Account = Awaited<ReturnType<typeof createTenantUser>>;

let t: TestApp;
let adminA: Account;
let adminB: Account;
let userB: Account;
beforeAll(async () => {
  t = await buildTestApp();
  adminA = await createTenantUser(t, { roles: ['admin'] });
  adminB = await createTenantUser(t, { roles: ['admin'] });
  userB = await createTenantUser(t, { tenantId: adminB.tenantId, email: 'carol@example.com' });
});
afterAll(() => t?.close());

const create = (key: string, email: string) => t.http('POST', '/admin/users', { key, json: { email, name: 'Probe' } });

describe('emails are unique per tenant: nothing reveals another tenant’s users', () => {
  it("creating a user with another tenant's email (any case) answers exactly like a fresh email", async () => {
    const taken = await create(adminA.key, 'CAROL@Example.com');
    const fresh = await create(adminA.key, 'nobody-anywhere@example.com');
    expect(taken.status).toBe(201);
    expect(fresh.status).toBe(201);
    expect(Object.keys(taken.body).sort()).toEqual(Object.keys(fresh.body).sort());
    expect(taken.body).toMatchObject({ email: 'carol@example.com', tenant_id: adminA.tenantId, roles: ['user'], is_active: true });
    // Two different people: tenant B's Carol is untouched and still works.
    expect(taken.body.id).not.toBe(userB.userId);
    expect((await t.http('GET', '/auth/me', { key: userB.key })).body).toMatchObject({ id: userB.userId, tenant_id: adminB.tenantId });
  });

  it('a duplicate inside the own tenant (any case) is 409 CONFLICT naming only the field, REST and GraphQL', async () => {
    expect((await create(adminA.key, 'dave@example.com')).status).toBe(201);
    const dup = await create(adminA.key, 'DAVE@example.COM');
    expect(dup.status).toBe(409);
    const err = envelope(dup);
    expect(err.code).toBe('CONFLICT');
    expect(err.details).toEqual({ field: 'email' });
    expect(err.message).toBe('A user with this email already exists in this tenant');
    const g = await t.gql('mutation ($input: JSON!) { createUser(input: $input) { id } }', { input: { email: 'Dave@example.com', name: 'D' } }, { key: adminA.key });
    expect(g.body.errors?.[0]?.extensions?.code).toBe('CONFLICT');
    expect(await t.app.db.conn.collection('users').countDocuments({ email: 'dave@example.com' })).toBe(1);
  });

  it("a system administrator's own-tenant rule is the same: one address per tenant", async () => {
    const first = await t.http('POST', '/admin/users', { json: { email: 'erin@example.com', name: 'E', tenant_id: adminB.tenantId } });
    expect(first.status).toBe(201);
    expect((await t.http('POST', '/admin/users', { json: { email: 'erin@example.com', name: 'E', tenant_id: adminB.tenantId } })).status).toBe(409);
    expect((await t.http('POST', '/admin/users', { json: { email: 'erin@example.com', name: 'E', tenant_id: adminA.tenantId } })).status).toBe(201);
  });

  it("a deleted user's email is free again in its tenant", async () => {
    const u = await create(adminA.key, 'frank@example.com');
    expect((await create(adminA.key, 'frank@example.com')).status).toBe(409);
    expect((await t.http('DELETE', `/admin/users/${u.body.id}`, { key: adminA.key })).status).toBe(204);
    const again = await create(adminA.key, 'frank@example.com');
    expect(again.status).toBe(201);
    expect(again.body.id).not.toBe(u.body.id);
  });

  it('logins by email see every active user with that address; the credential decides who it is', async () => {
    const found = await t.app.services.get('identity').usersByEmail(' Carol@EXAMPLE.com');
    expect(found.map((u) => u.tenant_id).sort()).toEqual([adminA.tenantId, adminB.tenantId].sort());
  });
});

describe('bootstrap with per-tenant emails', () => {
  it("ADMIN_EMAIL equal to a tenant user's email creates a separate system administrator and never promotes that user", async () => {
    const uri = uniqueDbUri();
    const first = await buildTestApp({ config: { MONGODB_URI: uri } });
    let victim: Account;
    try {
      victim = await createTenantUser(first, { email: 'boss@example.com', roles: ['admin'] });
    } finally {
      await first.close();
    }
    const second = await buildTestApp({ config: { MONGODB_URI: uri, ADMIN_EMAIL: 'Boss@example.com', ADMIN_API_KEY: 'another-admin-key-0123456789' } });
    try {
      const me = await second.http('GET', '/auth/me', { key: 'another-admin-key-0123456789' });
      expect(me.body).toMatchObject({ email: 'boss@example.com', scope: 'system' });
      expect(me.body.id).not.toBe(victim.userId);
      const v = await second.http('GET', '/auth/me', { key: victim.key });
      expect(v.body).toMatchObject({ id: victim.userId, scope: null, is_system_user: false, tenant_id: victim.tenantId });
    } finally {
      await second.close();
    }
  });
});

describe('upgrade from globally unique emails', () => {
  it('drops the old unique email index at start-up and keeps existing users', async () => {
    const uri = uniqueDbUri();
    const conn = await mongoose.createConnection(uri).asPromise();
    try {
      const users = conn.collection('users');
      await users.createIndex({ email: 1 }, { unique: true, name: 'email_1' });
      await users.insertOne({ email: 'old@example.com', name: 'Old', tenant_id: adminA.tenantId, roles: ['user'], features: [], attributes: {}, is_active: true });
      const app = await buildTestApp({ config: { MONGODB_URI: uri } });
      try {
        const indexes = await users.indexes();
        expect(indexes.find((i) => i.name === 'email_1')?.unique).toBeFalsy();
        expect(indexes.find((i) => i.name === 'tenant_email_unique')).toMatchObject({ unique: true, key: { tenant_id: 1, email: 1 } });
        expect(await users.findOne({ email: 'old@example.com' })).toMatchObject({ is_deleted: false });
      } finally {
        await app.close();
      }
    } finally {
      await conn.close();
    }
  });
});
