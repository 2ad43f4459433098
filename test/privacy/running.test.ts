/** While an execution is in progress its request is `running` with `started_at` set (observed mid-execution, with a write held open). */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, expectError, type TestApp } from '../helpers/app.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { privacyPlugin } from '../../plugins/privacy/index.ts';
import { gatedDataPlugin, gatedModel, holdNextWrite } from './gate-plugin.ts';
import { createSubject } from './helpers.ts';

let t: TestApp;
let admin: Awaited<ReturnType<typeof createTenantUser>>;

beforeAll(async () => {
  t = await buildTestApp({ plugins: [auditPlugin, privacyPlugin, gatedDataPlugin] });
  admin = await createTenantUser(t, { roles: ['admin'] });
});
afterAll(() => t?.close());

describe('an execution in progress', () => {
  it('the request is running with started_at set (REST and GraphQL); a second execution is refused; then it completes', async () => {
    const s = await createSubject(t, admin.tenantId);
    await gatedModel(t.app.db.conn).create({ tenant_id: s.tenantId, owner_id: s.userId, nickname: s.name });
    const created = await t.http('POST', '/privacy/erasure-requests', { key: admin.key, json: { user_id: s.userId } });
    expect(created.body).toMatchObject({ status: 'pending', started_at: null });
    const gate = holdNextWrite();
    const execution = t.http('POST', `/privacy/erasure-requests/${created.body.id}/execute`, { key: admin.key });
    let running: any;
    try {
      await gate.reached;
      running = (await t.http('GET', `/privacy/erasure-requests/${created.body.id}`, { key: admin.key })).body;
      expect(running).toMatchObject({ status: 'running', attempts: 1, completed_at: null, result: null, error: null });
      expect(Date.parse(running.started_at)).toBeGreaterThanOrEqual(Date.parse(created.body.created_at));
      const listed = await t.http('GET', '/privacy/erasure-requests?status=running', { key: admin.key });
      expect(listed.body.items.map((r: any) => r.id)).toEqual([created.body.id]);
      const g = await t.gql('query($id: String!) { erasureRequest(id: $id) { status started_at completed_at } }', { id: created.body.id }, { key: admin.key });
      expect(g.body.data.erasureRequest).toEqual({ status: 'running', started_at: running.started_at, completed_at: null });
      const second = await t.http('POST', `/privacy/erasure-requests/${created.body.id}/execute`, { key: admin.key });
      expect(expectError(second, 409, 'CONFLICT').details).toEqual({ status: 'running' });
    } finally {
      gate.release();
    }
    const done = await execution;
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ status: 'completed', attempts: 1, started_at: running.started_at });
    expect(Date.parse(done.body.completed_at)).toBeGreaterThanOrEqual(Date.parse(running.started_at));
    expect(await gatedModel(t.app.db.conn).findOne({ owner_id: s.userId }).lean()).toMatchObject({ nickname: null });
  });
});
