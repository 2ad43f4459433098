import { describe, expect, it } from 'vitest';
import { request } from 'node:http';
import { randomBytes } from 'node:crypto';
import { ADMIN_KEY, jobContext, uniqueDbUri } from '../helpers/app.ts';
import { startServerProcess } from '../helpers/processes.ts';
import { waitFor } from '../helpers/wait.ts';
import { col, filesApp } from './helpers.ts';

describe('an upload whose server is SIGKILLed mid-way', () => {
  it('leaves no ready file, and the cleanup job removes its record and stored chunks', async () => {
    const uri = uniqueDbUri();
    const proc = await startServerProcess({ MONGODB_URI: uri, FILES_ENABLED: 'true', RATE_LIMIT_ENABLED: 'false' });
    const tr = await fetch(`${proc.url}/admin/tenants`, { method: 'POST', headers: { 'X-API-Key': ADMIN_KEY, 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'killed' }) });
    const tenantId = ((await tr.json()) as { id: string }).id;
    // A multipart body announced at 4 MB of which 2 MB are sent before the server dies.
    const boundary = 'xxBOUNDARYxx';
    const headPart = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`);
    const total = headPart.length + 4_000_000 + Buffer.byteLength(`\r\n--${boundary}--\r\n`);
    const u = new URL(proc.url);
    const req = request({ host: u.hostname, port: u.port, path: '/files', method: 'POST', headers: { 'X-API-Key': ADMIN_KEY, 'X-Tenant-Id': tenantId, 'Content-Type': `multipart/form-data; boundary=${boundary}`, 'Content-Length': String(total) } });
    req.on('error', () => undefined);
    req.write(headPart);
    req.write(randomBytes(2_000_000));

    const t = await filesApp({ config: { MONGODB_URI: uri, FILES_UPLOAD_EXPIRY_HOURS: '0.0001' } });
    try {
      await waitFor(async () => (await col(t, 'file_bytes.chunks').countDocuments()) > 0, 'chunks of the upload in flight');
      expect(await proc.stop('SIGKILL')).toBe(null);
      req.destroy();
      expect(await col(t, 'files').countDocuments({ status: 'ready' })).toBe(0);
      expect(await col(t, 'files').countDocuments({ status: 'uploading' })).toBe(1);
      const job = t.app.kernel.jobs().find((j) => j.name === 'files_purge')!;
      // The expiry is 0.36 s; chunk ids carry whole seconds: the job removes them once a second has turned.
      const result = await waitFor(async () => {
        const r = (await job.run(jobContext(), {})) as { stale_uploads: number; incomplete_stores: number };
        return (await col(t, 'file_bytes.chunks').countDocuments()) === 0 && (await col(t, 'files').countDocuments()) === 0 ? r : null;
      }, 'the cleanup job to remove the dead upload', 20_000, 500);
      expect(result).toBeTruthy();
      expect(await col(t, 'file_bytes.files').countDocuments()).toBe(0);
    } finally {
      await t.close();
    }
  }, 60_000);
});
