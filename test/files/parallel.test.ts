import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import type { TestApp } from '../helpers/app.ts';
import { col, download, filesApp, sha256, tenant, upload } from './helpers.ts';

describe('parallel uploads', () => {
  let t: TestApp;
  let a: Awaited<ReturnType<typeof tenant>>;
  beforeAll(async () => {
    t = await filesApp();
    a = await tenant(t);
  });
  afterAll(() => t.close());

  it('100 uploads at once are all stored, each with its own bytes and sha256, none lost', async () => {
    const bodies = Array.from({ length: 100 }, () => randomBytes(64 * 1024));
    const answers = await Promise.all(bodies.map((b, i) => upload(t, a.key, b, { filename: `p${i}.bin` })));
    expect(answers.map((r) => r.status)).toEqual(bodies.map(() => 201));
    answers.forEach((r, i) => expect(r.body).toMatchObject({ status: 'ready', size: bodies[i]!.length, sha256: sha256(bodies[i]!), filename: `p${i}.bin` }));
    expect(await col(t, 'files').countDocuments({ status: 'ready' })).toBe(100);
    expect(await col(t, 'file_bytes.files').countDocuments()).toBe(100);
    for (const [i, r] of answers.entries()) expect(sha256((await download(t, `/files/${r.body._id}/content`, { key: a.key })).bytes)).toBe(sha256(bodies[i]!));
    expect(((await col(t, 'file_usage').findOne({ _id: a.tenantId as never })) as any).used).toBe(100 * 64 * 1024);
  });
});
