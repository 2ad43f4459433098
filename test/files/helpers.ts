/** Shared by the files tests: an app with the files plugin on, uploads through real multipart requests. */
import { createHash } from 'node:crypto';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { filesPlugin } from '../../plugins/files/index.ts';
import type { Plugin } from '../../core/plugin.ts';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';

export const filesApp = (opts: { config?: Record<string, string>; plugins?: Plugin[] } = {}) =>
  buildTestApp({
    plugins: [resourcesPlugin.configure({ resources: [] }), auditPlugin, filesPlugin, ...(opts.plugins ?? [])],
    config: { FILES_ENABLED: 'true', RATE_LIMIT_ENABLED: 'false', ...opts.config },
  });

/** A tenant with a plain user. */
export async function tenant(t: TestApp) {
  const u = await createTenantUser(t, { roles: ['user'] });
  return { tenantId: u.tenantId, key: u.key, userId: u.userId };
}

/** The smallest valid PNG (1×1), padded with an ancillary-free tail of `extra` zero bytes after IEND. */
export const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a5c8c3f80000000049454e44ae426082', 'hex');
export const PDF = Buffer.from('%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n');

export const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** POST /files as a browser would (FormData): one file part plus an optional `metadata` field. */
export async function upload(t: TestApp, key: string | null, bytes: Buffer, opts: { type?: string; filename?: string; metadata?: string; metadataFirst?: boolean } = {}) {
  const form = new FormData();
  if (opts.metadata !== undefined && opts.metadataFirst !== false) form.append('metadata', opts.metadata);
  form.append('file', new Blob([new Uint8Array(bytes)], { type: opts.type ?? 'application/octet-stream' }), opts.filename ?? 'f.bin');
  if (opts.metadata !== undefined && opts.metadataFirst === false) form.append('metadata', opts.metadata);
  const res = await fetch(`${t.url}/files`, { method: 'POST', body: form, headers: key ? { 'X-API-Key': key } : {} });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: (text ? JSON.parse(text) : null) as Record<string, any> };
}

/** GET with raw bytes back. */
export async function download(t: TestApp, path: string, opts: { key?: string | null; headers?: Record<string, string> } = {}) {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.key) headers['X-API-Key'] = opts.key;
  const res = await fetch(`${t.url}${path}`, { headers });
  return { status: res.status, headers: res.headers, bytes: Buffer.from(await res.arrayBuffer()) };
}

export const col = (t: TestApp, name: string) => t.app.db.conn.collection(name);
