import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Schema } from 'mongoose';
import { z } from 'zod';
import { buildTestApp, createTenantUser, envelope, type TestApp } from '../helpers/app.ts';
import { defineResource, resourcesPlugin } from '../../plugins/resources/index.ts';
import { definePlugin } from '../../core/plugin.ts';
import { defineRoute } from '../../core/http/route.ts';

/** A third-party plugin registering its own collection through the resources service. */
const notesPlugin = definePlugin({
  name: 'notes-plugin',
  dependsOn: ['resources'],
  setup({ services }) {
    const resources = services.get('resources');
    const notes = resources.register(
      defineResource({
        name: 'notes',
        schema: new Schema({ title: { type: String, required: true }, stars: { type: Number } }),
        input: { create: z.object({ title: z.string().min(3).max(20) }).strict() },
        handlers: {
          // Override: the list answers only titles, through the same service (same scope, same filters).
          list: async ({ actor, ctx }) => {
            const page = await notes.list(actor!, ctx.query as Record<string, string>);
            return { titles: page.items.map((d) => d.title) };
          },
        },
        routes: [
          defineRoute({
            method: 'GET', path: '/notes-stats', auth: 'user', summary: 'extra route of the notes resource',
            handler: async ({ actor }) => {
              const page = await notes.list(actor!, { per_page: '100' });
              return { count: page.mode === 'offset' ? page.total : page.items.length };
            },
          }),
        ],
      }),
    );
    return {};
  },
});

let t: TestApp;
let alice: { key: string };
let bob: { key: string };
beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [] }), notesPlugin] });
  alice = await createTenantUser(t);
  bob = await createTenantUser(t);
});
afterAll(() => t?.close());

describe('a resource registered by another plugin', () => {
  it('gets the generated API, with its custom input schema', async () => {
    const bad = await t.http('POST', '/notes', { key: alice.key, json: { title: 'no' } });
    expect(bad.status).toBe(422);
    expect((envelope(bad).details.errors as { loc: string[] }[])[0]!.loc).toEqual(['body', 'title']);
    const extra = await t.http('POST', '/notes', { key: alice.key, json: { title: 'hello', stars: 3 } });
    expect(extra.status).toBe(422); // the custom schema is strict: `stars` is not accepted on create
    const ok = await t.http('POST', '/notes', { key: alice.key, json: { title: 'hello' } });
    expect(ok.status).toBe(201);
    expect((await t.http('GET', `/notes/${ok.body._id}`, { key: alice.key })).body.title).toBe('hello');
  });

  it('uses the overriding list handler and its extra route, both tenant-scoped', async () => {
    await t.http('POST', '/notes', { key: bob.key, json: { title: 'bobs note' } });
    const list = await t.http('GET', '/notes', { key: alice.key });
    expect(list.body).toEqual({ titles: ['hello'] });
    expect((await t.http('GET', '/notes-stats', { key: alice.key })).body).toEqual({ count: 1 });
    expect((await t.http('GET', '/notes-stats', { key: bob.key })).body).toEqual({ count: 1 });
  });

  it('appears in /admin/schema and GraphQL', async () => {
    const schema = await t.http('GET', '/admin/schema');
    expect(schema.body.resources.map((r: { name: string }) => r.name)).toEqual(['notes']);
    const g = await t.gql('{ notes { items { title } } }', undefined, { key: alice.key });
    expect(g.body.data.notes.items).toEqual([{ title: 'hello' }]);
  });
});

describe('definition and registry errors fail fast with a readable message', () => {
  it.each([
    ['a name that is not snake_case', () => defineResource({ name: 'Bad-Name', schema: new Schema({ a: String }) }), /lower snake_case/],
    ['a searchable field that is not a string', () => defineResource({ name: 'x', schema: new Schema({ n: Number }), searchable_fields: ['n'] }), /searchable field "n"/],
    ['a cascade rule on a missing field', () => defineResource({ name: 'x', schema: new Schema({ a: String }), cascade: [{ field: 'nope', references: 'y', on_delete: 'deny' }] }), /cascade field "nope"/],
    ['populatable without ref', () => defineResource({ name: 'x', schema: new Schema({ a: String }), populatable: ['a'] }), /has no ref/],
  ])('%s', (_label, fn, message) => {
    expect(fn).toThrow(message);
  });

  it('a duplicate resource name stops start-up', async () => {
    const def = defineResource({ name: 'dup', schema: new Schema({ a: String }) });
    await expect(buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [def, def] })] })).rejects.toThrow(/registered twice/);
  });

  it('a cascade rule naming an unknown resource stops start-up', async () => {
    const def = defineResource({ name: 'orphans', schema: new Schema({ parent_id: { type: Schema.Types.ObjectId, ref: 'ghosts' } }), cascade: [{ field: 'parent_id', references: 'ghosts', on_delete: 'deny' }] });
    await expect(buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [def] })] })).rejects.toThrow(/unknown resource "ghosts"/);
  });
});
