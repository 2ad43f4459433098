/** Files and privacy: the uploader's export lists their files with signed URLs; their erasure removes bytes and records. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { privacyPlugin } from '../../plugins/privacy/index.ts';
import { filesPlugin } from '../../plugins/files/index.ts';
import { createSubject, type Subject } from '../privacy/helpers.ts';
import { col, PDF, PNG, sha256, upload } from './helpers.ts';

describe('files in the data subject’s export and erasure', () => {
  let t: TestApp;
  let admin: { key: string; tenantId: string };
  let s: Subject;
  let other: Subject;
  let mine: Record<string, any>[];
  let theirs: Record<string, any>;
  let exported: any;
  beforeAll(async () => {
    t = await buildTestApp({ plugins: [resourcesPlugin, auditPlugin, filesPlugin, privacyPlugin], config: { FILES_ENABLED: 'true', RATE_LIMIT_ENABLED: 'false' } });
    admin = await createTenantUser(t, { roles: ['admin'] });
    s = await createSubject(t, admin.tenantId);
    other = await createSubject(t, admin.tenantId);
    mine = [(await upload(t, s.key, PNG, { type: 'image/png', filename: 'me.png' })).body, (await upload(t, s.key, PDF, { type: 'application/pdf', filename: 'cv.pdf' })).body];
    theirs = (await upload(t, other.key, PDF, { type: 'application/pdf', filename: 'theirs.pdf' })).body;
    const ex = await t.http('GET', `/privacy/users/${s.userId}/export`, { key: s.key });
    expect(ex.status).toBe(200);
    exported = ex.body;
  });
  afterAll(() => t?.close());

  it('the export lists the subject’s files, each with a signed URL that serves its bytes, and no one else’s', async () => {
    const files = exported.collections.files as any[];
    expect(files.map((f) => f._id).sort()).toEqual(mine.map((f) => f._id).sort());
    for (const f of files) {
      expect(f.url).toMatch(new RegExp(`^${t.url}/files/${f._id}/content\\?expires=\\d+&signature=`));
      const got = await fetch(f.url);
      expect(got.status).toBe(200);
      expect(sha256(Buffer.from(await got.arrayBuffer()))).toBe(f.sha256);
    }
    expect(JSON.stringify(exported)).not.toContain(theirs._id);
  });

  it('erasure removes the subject’s files (records, bytes, quota usage) and clears references to them; others’ files stay', async () => {
    // Another user's project holds one of the subject's files.
    const project = (await t.http('POST', '/projects', { key: other.key, json: { name: 'shared', attachment: mine[0]!._id } })).body;
    expect(project.attachment).toBe(mine[0]!._id);
    const usage = async () => ((await col(t, 'file_usage').findOne({ _id: admin.tenantId as never })) as any)?.used ?? 0;
    expect(await usage()).toBe(PNG.length + PDF.length * 2);
    const req = await t.http('POST', '/privacy/erasure-requests', { key: admin.key, json: { user_id: s.userId } });
    expect(req.status).toBe(201);
    expect((await t.http('POST', `/privacy/erasure-requests/${req.body.id}/execute`, { key: admin.key })).status).toBe(200);

    const ids = mine.map((f) => new Types.ObjectId(f._id));
    expect(await col(t, 'files').countDocuments({ _id: { $in: ids } })).toBe(0);
    expect(await col(t, 'file_bytes.files').countDocuments({ filename: { $in: mine.map((f) => `${admin.tenantId}/${f._id}`) } })).toBe(0);
    for (const f of exported.collections.files) expect((await fetch(f.url)).status).toBe(404);
    expect(await usage()).toBe(PDF.length);
    expect((await t.http('GET', `/projects/${project._id}`, { key: other.key })).body.attachment).toBeNull();
    const kept = await t.http('GET', `/files/${theirs._id}`, { key: other.key });
    expect(kept.body.status).toBe('ready');
    expect(await col(t, 'file_bytes.files').countDocuments({ filename: `${admin.tenantId}/${theirs._id}` })).toBe(1);
  });
});
