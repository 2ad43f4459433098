import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Schema, Types } from 'mongoose';
import sharp from 'sharp';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { defineResource, resourcesPlugin } from '../../plugins/resources/index.ts';
import { sampleResourcesWithFiles } from '../../plugins/resources/sample-resources.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { filesPlugin } from '../../plugins/files/index.ts';
import { col, download, PDF, PNG, tenant, upload } from './helpers.ts';

// Images of at most 2000 bytes, a declared variant, and a file that may not be deleted while used.
const photos = defineResource({
  name: 'photos',
  schema: new Schema({
    title: { type: String, required: true },
    image: { type: 'file', accept: ['image/*'], max_bytes: 2000, variants: { thumb: { width: 2, height: 2, format: 'webp' } }, default: null },
  }),
  cascade: [{ field: 'image', references: 'files', on_delete: 'deny' }],
});


describe('file fields on resources: checks on write, cascade on delete, GraphQL', () => {
  let t: TestApp;
  let a: Awaited<ReturnType<typeof tenant>>;
  let b: Awaited<ReturnType<typeof tenant>>;
  let png: Record<string, any>;
  let pdf: Record<string, any>;
  beforeAll(async () => {
    t = await buildTestApp({
      plugins: [resourcesPlugin.configure({ resources: [...sampleResourcesWithFiles, photos] }), auditPlugin, filesPlugin],
      config: { FILES_ENABLED: 'true', RATE_LIMIT_ENABLED: 'false' },
    });
    a = await tenant(t);
    b = await tenant(t);
    png = (await upload(t, a.key, PNG, { type: 'image/png', filename: 'dot.png' })).body;
    pdf = (await upload(t, a.key, PDF, { type: 'application/pdf' })).body;
  });
  afterAll(() => t.close());

  const count = (name: string) => col(t, name).countDocuments({});

  it('/admin/schema shows the file rules and the implicit set_null rule', async () => {
    const res = await t.http('GET', '/admin/schema');
    const photo = res.body.resources.find((r: any) => r.name === 'photos');
    expect(photo.fields.find((f: any) => f.name === 'image')).toMatchObject({ type: 'objectId', ref: 'files', file: { accept: ['image/*'], max_bytes: 2000 } });
    const project = res.body.resources.find((r: any) => r.name === 'projects');
    expect(project.cascade).toContainEqual({ field: 'attachment', references: 'files', on_delete: 'set_null' });
  });

  it('projects.attachment takes a ready file of the tenant; REST keeps the id', async () => {
    const res = await t.http('POST', '/projects', { key: a.key, json: { name: 'with pdf', attachment: pdf._id } });
    expect(res.status).toBe(201);
    expect(res.body.attachment).toBe(pdf._id);
    expect((await t.http('GET', `/projects/${res.body._id}`, { key: a.key })).body.attachment).toBe(pdf._id);
  });

  it("another tenant's file is refused as one that does not exist, and nothing is written", async () => {
    const before = await count('projects');
    const theirs = await t.http('POST', '/projects', { key: b.key, json: { name: 'x', attachment: pdf._id } });
    const none = await t.http('POST', '/projects', { key: b.key, json: { name: 'x', attachment: String(new Types.ObjectId()) } });
    expect(theirs.status).toBe(422);
    expect(theirs.body.error.code).toBe('VALIDATION_ERROR');
    expect(JSON.stringify(theirs.body.error.details)).toContain('attachment');
    expect(theirs.body.error.details).toEqual(none.body.error.details);
    const gql = await t.gql('mutation($i: JSON!) { createProject(input: $i) { _id } }', { i: { name: 'x', attachment: pdf._id } }, { key: b.key });
    expect(gql.body.errors?.[0]?.extensions?.code).toBe('VALIDATION_ERROR');
    expect(await count('projects')).toBe(before);
  });

  it('a file not ready, of a type not accepted or too large is refused on create and update', async () => {
    const before = await count('photos');
    const up = (await upload(t, a.key, PNG, { type: 'image/png' })).body;
    await col(t, 'files').updateOne({ _id: new Types.ObjectId(up._id) }, { $set: { status: 'uploading' } });
    const cases: [string, string][] = [[up._id, 'file_not_ready'], [pdf._id, 'file_type_not_accepted']];
    const big = (await upload(t, a.key, Buffer.concat([PNG, Buffer.alloc(3000)]), { type: 'image/png' })).body;
    expect(big.content_type).toBe('image/png');
    cases.push([big._id, 'file_too_large']);
    for (const [id, type] of cases) {
      const res = await t.http('POST', '/photos', { key: a.key, json: { title: 't', image: id } });
      expect(res.status, type).toBe(422);
      expect(res.body.error.code).toBe('VALIDATION_ERROR');
      expect(JSON.stringify(res.body.error.details)).toContain(type);
      expect(JSON.stringify(res.body.error.details)).toContain('image');
    }
    expect(await count('photos')).toBe(before);
    const ok = await t.http('POST', '/photos', { key: a.key, json: { title: 't' } });
    const patch = await t.http('PATCH', `/photos/${ok.body._id}`, { key: a.key, json: { image: pdf._id }, headers: { 'If-Match': ok.headers.get('etag')! } });
    expect(patch.status).toBe(422);
    expect(JSON.stringify(patch.body.error.details)).toContain('file_type_not_accepted');
    expect((await col(t, 'photos').findOne({ _id: new Types.ObjectId(ok.body._id) }))!.image).toBeNull();
  });

  it('attaching renders the declared variants, served by name', async () => {
    const bytes = await sharp({ create: { width: 8, height: 6, channels: 3, background: { r: 200, g: 30, b: 30 } } }).png().toBuffer();
    const img = (await upload(t, a.key, bytes, { type: 'image/png', filename: 'v.png' })).body;
    expect((await t.http('POST', '/photos', { key: a.key, json: { title: 'v', image: img._id } })).status).toBe(201);
    const rec = await t.http('GET', `/files/${img._id}`, { key: a.key });
    expect(rec.body.variants.thumb).toMatchObject({ width: 2, height: 2, format: 'webp' });
    const thumb = await download(t, `/files/${img._id}/content?variant=thumb`, { key: a.key });
    expect(thumb.status).toBe(200);
    expect(thumb.headers.get('content-type')).toBe('image/webp');
    expect(await sharp(thumb.bytes).metadata()).toMatchObject({ format: 'webp', width: 2, height: 2 });
    expect((await download(t, `/files/${img._id}/content?variant=nope`, { key: a.key })).status).toBe(404);
  });

  it('deleting a file clears projects.attachment (set_null) and is denied while a photo uses it (deny)', async () => {
    const f = (await upload(t, a.key, PDF, { type: 'application/pdf' })).body;
    const p = (await t.http('POST', '/projects', { key: a.key, json: { name: 'p', attachment: f._id } })).body;
    const etag = (await t.http('GET', `/files/${f._id}`, { key: a.key })).headers.get('etag')!;
    expect((await t.http('DELETE', `/files/${f._id}`, { key: a.key, headers: { 'If-Match': etag } })).status).toBe(200);
    const after = await t.http('GET', `/projects/${p._id}`, { key: a.key });
    expect(after.body.attachment).toBeNull();
    expect(after.body.version).toBe(2);

    const img = (await upload(t, a.key, await sharp({ create: { width: 4, height: 4, channels: 3, background: { r: 0, g: 0, b: 0 } } }).png().toBuffer(), { type: 'image/png' })).body;
    await t.http('POST', '/photos', { key: a.key, json: { title: 'd', image: img._id } });
    const ie = (await t.http('GET', `/files/${img._id}`, { key: a.key })).headers.get('etag')!;
    const denied = await t.http('DELETE', `/files/${img._id}`, { key: a.key, headers: { 'If-Match': ie } });
    expect(denied.status).toBe(422);
    expect(denied.body.error.code).toBe('CASCADE_DENY');
    expect((await t.http('GET', `/files/${img._id}`, { key: a.key })).body.status).toBe('ready');
  });

  it('GraphQL: the field resolves to the File with a signed url; another tenant sees no file', async () => {
    const p = (await t.http('POST', '/projects', { key: a.key, json: { name: 'g', attachment: png._id } })).body;
    const q = await t.gql('query($id: ID!) { project(id: $id) { attachment { _id filename content_type url } } }', { id: p._id }, { key: a.key });
    expect(q.body.errors).toBeUndefined();
    expect(q.body.data.project.attachment).toMatchObject({ _id: png._id, filename: 'dot.png', content_type: 'image/png' });
    const got = await fetch(q.body.data.project.attachment.url);
    expect(got.status).toBe(200);
    expect(Buffer.from(await got.arrayBuffer()).equals(PNG)).toBe(true);
    // Planted across tenants in the database: the resolver reads through the files resource's own scope.
    const theirs = (await t.http('POST', '/projects', { key: b.key, json: { name: 'b' } })).body;
    await col(t, 'projects').updateOne({ _id: new Types.ObjectId(theirs._id) }, { $set: { attachment: new Types.ObjectId(png._id) } });
    const other = await t.gql('query($id: ID!) { project(id: $id) { attachment { _id url } } }', { id: theirs._id }, { key: b.key });
    expect(other.body.data.project.attachment).toBeNull();
  });
});
