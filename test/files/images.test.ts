import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import sharp from 'sharp';
import type { TestApp } from '../helpers/app.ts';
import { col, download, filesApp, PDF, tenant, upload } from './helpers.ts';

const image = (width: number, height: number) => sharp({ create: { width, height, channels: 3, background: { r: 200, g: 30, b: 30 } } }).png().toBuffer();

describe('image transforms', () => {
  let t: TestApp;
  let a: Awaited<ReturnType<typeof tenant>>;
  let photo: Record<string, any>;
  beforeAll(async () => {
    t = await filesApp({ config: { FILES_TRANSFORM_ALLOWED: '200x200,100x0', FILES_MAX_PIXELS: '200000' } });
    a = await tenant(t);
    photo = (await upload(t, a.key, await image(400, 300), { type: 'image/png', filename: 'photo.png' })).body;
  });
  afterAll(() => t.close());

  it('an allowed transform is made once, stored beside the original, and served from storage afterwards', async () => {
    const path = `/files/${photo._id}/content?w=200&h=200&fit=cover&format=webp`;
    const first = await download(t, path, { key: a.key });
    expect(first.status).toBe(200);
    expect(first.headers.get('content-type')).toBe('image/webp');
    expect(await sharp(first.bytes).metadata()).toMatchObject({ format: 'webp', width: 200, height: 200 });
    const key = `${a.tenantId}/${photo._id}/w200_h200_cover_webp`;
    expect(await col(t, 'file_bytes.files').countDocuments({ filename: key })).toBe(1);
    const rec = await t.http('GET', `/files/${photo._id}`, { key: a.key });
    expect(rec.body.variants.w200_h200_cover_webp).toMatchObject({ format: 'webp', size: first.bytes.length });
    const second = await download(t, path, { key: a.key });
    expect(second.bytes.equals(first.bytes)).toBe(true);
    expect(second.headers.get('etag')).toBe(first.headers.get('etag'));
    expect(await col(t, 'file_bytes.files').countDocuments({ filename: key })).toBe(1);
    expect((await download(t, path, { key: a.key, headers: { 'If-None-Match': first.headers.get('etag')! } })).status).toBe(304);
    const wide = await download(t, `/files/${photo._id}/content?w=100`, { key: a.key });
    expect(await sharp(wide.bytes).metadata()).toMatchObject({ format: 'png', width: 100, height: 75 });
  });

  it('sizes outside FILES_TRANSFORM_ALLOWED are 422, a file that is no image 415, another tenant 404', async () => {
    const res = await t.http('GET', `/files/${photo._id}/content?w=300&h=300`, { key: a.key });
    expect(res.status).toBe(422);
    expect(res.body.error.details.errors[0].loc).toEqual(['query', 'w']);
    expect((await t.http('GET', `/files/${photo._id}/content?w=200&h=200&format=gif`, { key: a.key })).status).toBe(422);
    const pdf = (await upload(t, a.key, PDF)).body;
    expect((await t.http('GET', `/files/${pdf._id}/content?w=200&h=200`, { key: a.key })).status).toBe(415);
    const b = await tenant(t);
    expect((await t.http('GET', `/files/${photo._id}/content?w=200&h=200`, { key: b.key })).status).toBe(404);
  });

  it('an image above FILES_MAX_PIXELS is refused (413) without decoding it, and no variant is kept', async () => {
    const big = (await upload(t, a.key, await image(500, 500), { type: 'image/png' })).body;
    const res = await t.http('GET', `/files/${big._id}/content?w=200&h=200`, { key: a.key });
    expect(res.status).toBe(413);
    expect(res.body.error.details).toEqual({ max_pixels: 200000 });
    expect(await col(t, 'file_bytes.files').countDocuments({ filename: { $regex: `^${a.tenantId}/${big._id}/` } })).toBe(0);
  });
});
