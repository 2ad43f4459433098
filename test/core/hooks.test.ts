import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { definePlugin } from '../../core/plugin.ts';
import { onHook } from '../../core/hooks.ts';
import { buildTestApp, envelope, type TestApp } from '../helpers/app.ts';
import { examplePlugin } from '../fixtures/example-plugin.ts';

// Registered after the example plugin (dependsOn), so its BEFORE handler sees the example's result.
const shoutPlugin = definePlugin({
  name: 'shout',
  dependsOn: ['example'],
  setup: () => ({
    hooks: [
      onHook('BEFORE_GREET', (p) => (p.name === 'quiet' ? undefined : { name: `${p.name}!` })),
      onHook('BEFORE_GREET', (p) => {
        if (p.name === 'late-veto!') throw new Error('plain errors in a BEFORE hook are internal errors');
      }),
    ],
  }),
});

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [shoutPlugin, examplePlugin] });
});
afterAll(() => t?.close());

describe('BEFORE hooks', () => {
  it('transform the payload, in registration order across plugins (REST)', async () => {
    const res = await t.http('GET', `/example/hello?name=${encodeURIComponent('  bob  ')}`, { key: null });
    expect(res.status).toBe(200);
    // example trims first, then shout appends "!"
    expect(res.body).toEqual({ greeting: 'Hello, bob!' });
  });

  it('a handler returning nothing keeps the payload', async () => {
    const res = await t.http('GET', '/example/hello?name=quiet', { key: null });
    expect(res.body).toEqual({ greeting: 'Hello, quiet' });
  });

  it('transform the payload (GraphQL)', async () => {
    const res = await t.gql('{ exampleGreeting(name: "  eve ") }');
    expect(res.body).toEqual({ data: { exampleGreeting: 'Hello, eve!' } });
  });

  it('a veto with an AppError becomes that error in the REST envelope', async () => {
    const res = await t.http('GET', '/example/hello?name=forbidden', { key: null });
    expect(res.status).toBe(422);
    const err = envelope(res);
    expect(err.code).toBe('GREETING_VETOED');
    expect(err.message).toBe('That name may not be greeted');
    expect(err.details).toEqual({ name: 'forbidden' });
  });

  it('a veto with an AppError becomes that error in GraphQL extensions', async () => {
    const res = await t.gql('{ exampleGreeting(name: "forbidden") }');
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ exampleGreeting: null });
    expect(res.body.errors).toHaveLength(1);
    const [e] = res.body.errors!;
    expect(e!.message).toBe('That name may not be greeted');
    expect(e!.path).toEqual(['exampleGreeting']);
    expect(e!.extensions).toMatchObject({ code: 'GREETING_VETOED', status: 422, details: { name: 'forbidden' } });
  });

  it('a plain error thrown by a BEFORE hook is a masked 500', async () => {
    const res = await t.http('GET', '/example/hello?name=late-veto', { key: null });
    expect(res.status).toBe(500);
    const err = envelope(res);
    expect(err.code).toBe('INTERNAL_ERROR');
    expect(err.message).toBe('Internal server error');
  });
});

describe('the bus', () => {
  it('every subscription is known to the bus, and unsubscribing works', async () => {
    expect(t.app.hooks.hasListeners('BEFORE_GREET')).toBe(true);
    expect(t.app.hooks.hasListeners('BEFORE_DELETE')).toBe(false);
    const seen: string[] = [];
    const off = t.app.hooks.on('BEFORE_GREET', (p) => void seen.push(p.name), 'test');
    await t.http('GET', '/example/hello?name=gil', { key: null });
    off();
    await t.http('GET', '/example/hello?name=hal', { key: null });
    expect(seen).toEqual(['gil!']);
  });

  it('runs nothing after a change: reacting to one is a consumer of the event log (docs/events.md)', () => {
    expect('emitAfter' in t.app.hooks).toBe(false);
  });
});
