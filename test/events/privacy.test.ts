/**
 * Erasure requests in the event log: `erasure_request.completed`, written in the request's outbox
 * by the conditional update that completes it (docs/events.md), with the request as the API shows
 * it (ids and counts, never the subject's personal values), in the tenant's log only.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { privacyPlugin } from '../../plugins/privacy/index.ts';
import { privacyDataPlugin } from '../fixtures/privacy-data-plugin.ts';
import { createSubject, seedSubject } from '../privacy/helpers.ts';
import { catalogue, eventsOfType, expectConforms, visibleTo } from './domain-helpers.ts';

let t: TestApp;
let A: Awaited<ReturnType<typeof createTenantUser>>;
let B: Awaited<ReturnType<typeof createTenantUser>>;
let schema: Record<string, any>;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin, auditPlugin, privacyPlugin, privacyDataPlugin] });
  A = await createTenantUser(t, { roles: ['admin'] });
  B = await createTenantUser(t, { roles: ['admin'] });
  schema = (await catalogue(t, A.key, ['erasure_request.completed'], 'privacy'))['erasure_request.completed']!;
});
afterAll(() => t?.close());

const ofRequest = (id: string) => (e: Record<string, any>) => e.data.id === id;

describe('erasure_request.completed', () => {
  it('the catalogue lists it with the JSON Schema of an erasure request', () => {
    expect(schema.schema.properties).toMatchObject({ id: { type: 'string' }, user_id: { type: 'string' }, status: { enum: expect.arrayContaining(['completed']) }, result: expect.any(Object) });
  });

  it('an executed request stores one event with the request as the API shows it; only its tenant reads it', async () => {
    const s = await createSubject(t, A.tenantId);
    await seedSubject(t, s);
    const created = await t.http('POST', '/privacy/erasure-requests', { key: A.key, json: { user_id: s.userId } });
    expect(created.status).toBe(201);
    // Nothing is stored before completion.
    expect(await visibleTo(t, A.key, 'erasure_request.completed', ofRequest(created.body.id))).toEqual([]);
    const executed = await t.http('POST', `/privacy/erasure-requests/${created.body.id}/execute`, { key: A.key });
    expect(executed.status).toBe(200);
    expect(executed.body.status).toBe('completed');

    const [e] = await eventsOfType(t, A.key, 'erasure_request.completed', ofRequest(created.body.id));
    expect(e).toMatchObject({ type: 'erasure_request.completed', tenant_id: A.tenantId, actor: A.userId });
    const got = await t.http('GET', `/privacy/erasure-requests/${created.body.id}`, { key: A.key });
    expect(e!.data).toEqual(got.body);
    expect(e!.data).toMatchObject({ user_id: s.userId, status: 'completed', result: { account_disabled: true, consents_revoked: 2 } });
    expectConforms(schema, e!.data);
    // Ids and counts only: none of the subject's personal values.
    const text = JSON.stringify(e).toLowerCase();
    for (const v of [s.email, s.name, s.phone]) expect(text).not.toContain(v.toLowerCase());

    expect(await visibleTo(t, B.key, 'erasure_request.completed', ofRequest(created.body.id))).toEqual([]);
    expect((await t.http('GET', `/events/${e!.id}`, { key: B.key })).status).toBe(404);
    expect(await visibleTo(t, ADMIN_KEY, 'erasure_request.completed', ofRequest(created.body.id))).toHaveLength(1);

    // Executing a completed request again is a no-op: no second event.
    expect((await t.http('POST', `/privacy/erasure-requests/${created.body.id}/execute`, { key: A.key })).status).toBe(200);
    await t.app.services.get('events').flush();
    expect(await visibleTo(t, A.key, 'erasure_request.completed', ofRequest(created.body.id))).toHaveLength(1);
  });
});
