/**
 * `/openapi.json` and code access rules: a document schema does not require a field that a
 * resource's code read rules may leave out (outside a `fields` list, in an `except`, or any field
 * when a rule is a function of the actor); other required fields stay required.
 */
import { Schema } from 'mongoose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { defineResource, resourcesPlugin } from '../../plugins/resources/index.ts';
import { accessPlugin } from '../../plugins/access/index.ts';
import { openapiPlugin } from '../../plugins/openapi/index.ts';
import { folders, notes } from './helpers.ts';
import type { Actor } from '../../core/context.ts';

const BASE = ['tenant_id', 'created_at', 'updated_at', 'created_by', 'updated_by', 'is_deleted', 'deleted_at', 'deleted_by', 'version'];
const papers = defineResource({
  name: 'papers',
  schema: new Schema({ title: { type: String, required: true }, body: { type: String, required: true }, summary: { type: String, required: true }, note: { type: String } }),
  access: { viewer: { read: { fields: { except: ['body'] } } }, lister: { read: { rows: { note: 'x' }, fields: ['title', 'body'] } } },
});
const drafts = defineResource({
  name: 'drafts',
  schema: new Schema({ title: { type: String, required: true } }),
  access: { writer: { read: (actor: Actor) => (actor.attributes.all ? true : { fields: [] }) } },
});

let t: TestApp;
let schemas: Record<string, { required: string[] }>;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [notes, folders, papers, drafts] }), accessPlugin, openapiPlugin] });
  schemas = (await t.http('GET', '/openapi.json', { key: null })).body.components.schemas;
});
afterAll(() => t?.close());

describe('document schemas under code access rules', () => {
  it('a field outside a rule\'s fields list, in its except, or under a function rule is not required', () => {
    // body: in viewer's except; summary: outside lister's list; title: every rule lets it be read.
    expect(schemas.Paper!.required).toEqual(['_id', 'title', ...BASE]);
    expect(schemas.Draft!.required).toEqual(['_id', ...BASE]);
  });

  it('a resource without code rules, or whose rules list every required field, keeps its required fields', () => {
    expect(schemas.Note!.required).toEqual(['_id', 'title', ...BASE]);
    expect(schemas.Folder!.required).toEqual(['_id', 'name', ...BASE]);
  });
});
