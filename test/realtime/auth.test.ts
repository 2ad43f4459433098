/**
 * Credentials are checked when a stream opens and again while it lasts: a revoked key or a
 * disabled user ends SSE streams and subscriptions within AUTH_CACHE_TTL_MS plus one poll interval
 * (asserted with five times that as the bound, for busy machines)
 * (also when the revocation happens on another replica), and a token's `exp` ends its stream then.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, uniqueDbUri, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { resourceEventsPlugin } from '../fixtures/resource-events-plugin.ts';
import { eventStream, subscribe, until, wsClient } from './helpers.ts';

const TTL = 600;
const POLL = 100;
const config = { SAMPLE_RESOURCES_ENABLED: 'false', RATE_LIMIT_ENABLED: 'false', AUTH_CACHE_TTL_MS: String(TTL), EVENTS_POLL_INTERVAL_MS: String(POLL) };
const uri = uniqueDbUri();
let a: TestApp;
let b: TestApp;
beforeAll(async () => {
  a = await buildTestApp({ plugins: [resourcesPlugin, resourceEventsPlugin], config: { ...config, MONGODB_URI: uri } });
  b = await buildTestApp({ plugins: [resourcesPlugin, resourceEventsPlugin], config: { ...config, MONGODB_URI: uri } });
});
afterAll(async () => {
  await b?.close();
  await a?.close();
});

const lastError = (events: { event?: string; data: string }[]) => JSON.parse(events.filter((e) => e.event === 'error').at(-1)!.data);

describe('stream credentials', () => {
  it('a key revoked on another replica ends its SSE stream and its subscription within AUTH_CACHE_TTL_MS + one poll', async () => {
    const u = await createTenantUser(a, { features: ['memos'] });
    const s = await eventStream(a.url, { key: u.key });
    const ws = wsClient(a.url, { apiKey: u.key });
    const sub = subscribe(ws, 'subscription { events { id } }');
    // Both are open and authenticated (each has answered its credential check at least once).
    await new Promise((r) => setTimeout(r, TTL + 2 * POLL));
    expect(s.ended).toBe(false);
    expect(sub.done).toBe(false);
    const revokedAt = Date.now();
    expect((await b.http('DELETE', `/admin/api-keys/${u.keyId}`)).status).toBe(200);
    await until(() => s.ended && sub.done, 30_000, 'both ends');
    const took = Date.now() - revokedAt;
    // Five times the mechanism's own delay: holds on a busy machine (1.7 s measured at load 6), and
    // still far below anything else that could end the streams (keep-alive 15 s, connection time-outs).
    expect(took).toBeLessThan(5 * (TTL + POLL));
    expect(lastError(s.events).error).toMatchObject({ code: 'AUTH_REQUIRED' });
    expect(sub.errors[0].extensions.code).toBe('AUTH_REQUIRED');
    await ws.dispose();
  });

  it('a user disabled ends its streams; a new stream with the same key is refused with 401', async () => {
    const u = await createTenantUser(a, { features: ['memos'] });
    const s = await eventStream(a.url, { key: u.key });
    expect(s.status).toBe(200);
    expect((await a.http('PATCH', `/admin/users/${u.userId}`, { json: { is_active: false } })).status).toBe(200);
    await until(() => s.ended, TTL + POLL + 3000, 'the end');
    expect(lastError(s.events).error.code).toBe('AUTH_REQUIRED');
    const again = await eventStream(a.url, { key: u.key });
    expect(again.status).toBe(401);
    expect(again.body.error.code).toBe('AUTH_REQUIRED');
  });

  it("a bearer token's exp ends its SSE stream and its subscription at exp", async () => {
    const u = await createTenantUser(a, { features: ['memos'] });
    const identity = a.app.services.get('identity');
    const actor = await identity.authenticateApiKey(u.key);
    const exp = Math.floor(Date.now() / 1000) + 2;
    const { token } = await identity.issueToken(actor, { ...actor.credential!, exp });
    const s = await eventStream(a.url, { token });
    const ws = wsClient(a.url, { authorization: `Bearer ${token}` });
    const sub = subscribe(ws, 'subscription { events { id } }');
    expect(s.status).toBe(200);
    await until(() => s.ended && sub.done, 30_000, 'the end at exp');
    const endedAt = Date.now();
    // Not before exp (load only delays), and soon after it: the generous bound of the test above.
    expect(endedAt).toBeGreaterThanOrEqual(exp * 1000 - 50);
    expect(endedAt).toBeLessThan(exp * 1000 + 5 * (TTL + POLL));
    expect(lastError(s.events).error).toMatchObject({ code: 'AUTH_REQUIRED', message: 'Token expired' });
    expect(sub.errors[0].extensions.code).toBe('AUTH_REQUIRED');
    expect(sub.errors[0].message).toBe('Token expired');
    await ws.dispose();
  });
});
