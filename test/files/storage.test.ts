import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { PassThrough, type Readable } from 'node:stream';
import S3rver from 's3rver';
import { definePlugin } from '../../core/plugin.ts';
import type { StorageAdapter } from '../../plugins/files/index.ts';
import { uniqueDbUri, type TestApp } from '../helpers/app.ts';
import { download, filesApp, PNG, sha256, tenant, upload } from './helpers.ts';

/** A storage adapter of a plugin: bytes in a Map (enough to prove the registry routes to it). */
function memoryAdapter(): StorageAdapter & { data: Map<string, Buffer> } {
  const data = new Map<string, Buffer>();
  return {
    name: 'memory', data,
    async put(key: string, body: Readable) {
      const parts: Buffer[] = [];
      for await (const c of body) parts.push(c as Buffer);
      data.set(key, Buffer.concat(parts));
      return { size: data.get(key)!.length };
    },
    async get(key, range) {
      const b = data.get(key)!;
      const out = new PassThrough();
      out.end(range ? b.subarray(range.start, range.end + 1) : b);
      return out;
    },
    async delete(key) {
      data.delete(key);
    },
    async stat(key) {
      return data.has(key) ? { size: data.get(key)!.length } : null;
    },
  };
}

describe('storage adapters', () => {
  let s3: S3rver;
  let dir: string;
  let endpoint: string;
  const s3Config = () => ({ FILES_S3_BUCKET: 'test-bucket', FILES_S3_ENDPOINT: endpoint, AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER' });
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 's3rver-'));
    s3 = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: dir, configureBuckets: [{ name: 'test-bucket', configs: [] }] });
    const addr = await s3.run();
    endpoint = `http://127.0.0.1:${addr.port}`;
  });
  afterAll(async () => {
    await s3.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('s3: a file above one part (multipart upload) and a small one round-trip, with ranges', async () => {
    const t = await filesApp({ config: { ...s3Config(), FILES_STORAGE: 's3', FILES_MAX_BYTES: String(20_000_000) } });
    try {
      const a = await tenant(t);
      const big = randomBytes(11 * 1024 * 1024 + 17);
      const up = await upload(t, a.key, big, { filename: 'big.bin' });
      expect(up.status).toBe(201);
      expect(up.body).toMatchObject({ storage: 's3', size: big.length, sha256: sha256(big) });
      const full = await download(t, `/files/${up.body._id}/content`, { key: a.key });
      expect(full.status).toBe(200);
      expect(sha256(full.bytes)).toBe(sha256(big));
      const part = await download(t, `/files/${up.body._id}/content`, { key: a.key, headers: { Range: 'bytes=5242870-5242890' } });
      expect(part.status).toBe(206);
      expect(part.bytes.equals(big.subarray(5242870, 5242891))).toBe(true);
      const small = await upload(t, a.key, PNG, { type: 'image/png' });
      expect(small.body.storage).toBe('s3');
      expect((await download(t, `/files/${small.body._id}/content`, { key: a.key })).bytes.equals(PNG)).toBe(true);
    } finally {
      await t.close();
    }
  });

  it('a file keeps the adapter that holds it: after FILES_STORAGE changes, old files still download', async () => {
    const uri = uniqueDbUri();
    let t: TestApp = await filesApp({ config: { MONGODB_URI: uri } });
    let a: Awaited<ReturnType<typeof tenant>>;
    let oldId: string;
    try {
      a = await tenant(t);
      const up = await upload(t, a.key, PNG, { type: 'image/png' });
      expect(up.body.storage).toBe('gridfs');
      oldId = up.body._id;
    } finally {
      await t.close();
    }
    t = await filesApp({ config: { MONGODB_URI: uri, ...s3Config(), FILES_STORAGE: 's3' } });
    try {
      expect((await download(t, `/files/${oldId}/content`, { key: a.key })).bytes.equals(PNG)).toBe(true);
      const next = await upload(t, a.key, PNG, { type: 'image/png' });
      expect(next.body.storage).toBe('s3');
    } finally {
      await t.close();
    }
  });

  it('a plugin registers its own adapter through the files service; an unknown FILES_STORAGE fails start-up', async () => {
    const mem = memoryAdapter();
    const plugin = definePlugin({ name: 'test-memory-storage', dependsOn: ['files'], setup({ services }) { services.get('files').registerStorage(mem); return {}; } });
    const t = await filesApp({ config: { FILES_STORAGE: 'memory' }, plugins: [plugin] });
    try {
      const a = await tenant(t);
      const up = await upload(t, a.key, PNG, { type: 'image/png' });
      expect(up.body.storage).toBe('memory');
      expect(mem.data.get(`${a.tenantId}/${up.body._id}`)?.equals(PNG)).toBe(true);
    } finally {
      await t.close();
    }
    await expect(filesApp({ config: { FILES_STORAGE: 'nowhere' } })).rejects.toThrow(/FILES_STORAGE=nowhere/);
  });
});
