/**
 * tus across replicas: two server processes on one database (a child process running server.ts
 * and this test's own app), each with its own tus server and in-memory locker, as two replicas
 * behind a load balancer.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'node:http';
import { randomBytes } from 'node:crypto';
import { uniqueDbUri, type TestApp } from '../helpers/app.ts';
import { startServerProcess, type ServerProcess } from '../helpers/processes.ts';
import { waitFor } from '../helpers/wait.ts';
import { col, download, filesApp, sha256, tenant } from './helpers.ts';

const TUS = { 'Tus-Resumable': '1.0.0' };

async function create(t: { url: string }, key: string, length: number) {
  const res = await fetch(`${t.url}/files/uploads`, { method: 'POST', headers: { ...TUS, 'X-API-Key': key, 'Upload-Length': String(length), 'Upload-Metadata': `filename ${Buffer.from('r.bin').toString('base64')}` } });
  expect(res.status).toBe(201);
  return res.headers.get('location')!;
}

async function patch(t: { url: string }, key: string, loc: string, offset: number, body: Buffer) {
  const res = await fetch(`${t.url}${loc}`, { method: 'PATCH', headers: { ...TUS, 'X-API-Key': key, 'Upload-Offset': String(offset), 'Content-Type': 'application/offset+octet-stream' }, body: new Uint8Array(body) });
  await res.text();
  return res;
}

const offsetOn = async (t: { url: string }, key: string, loc: string) => Number((await fetch(`${t.url}${loc}`, { method: 'HEAD', headers: { ...TUS, 'X-API-Key': key } })).headers.get('upload-offset'));

/** A PATCH whose body is sent in two steps: the caller decides when the rest follows. */
function heldPatch(t: { url: string }, key: string, loc: string, body: Buffer, first: number) {
  const u = new URL(`${t.url}${loc}`);
  const req = request({ host: u.hostname, port: u.port, path: u.pathname, method: 'PATCH', headers: { ...TUS, 'X-API-Key': key, 'Upload-Offset': '0', 'Content-Type': 'application/offset+octet-stream', 'Content-Length': String(body.length) } });
  const answer = new Promise<{ status: number; fileId: string | undefined }>((resolve, reject) => {
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode!, fileId: res.headers['upload-file-id'] as string | undefined }));
    });
    req.on('error', reject);
  });
  req.write(body.subarray(0, first));
  return { answer, finish: () => req.end(body.subarray(first)) };
}

describe('resumable uploads across two servers on one database', () => {
  const uri = uniqueDbUri();
  let one: ServerProcess;
  let two: TestApp;
  let a: Awaited<ReturnType<typeof tenant>>;
  beforeAll(async () => {
    one = await startServerProcess({ MONGODB_URI: uri, FILES_ENABLED: 'true', RATE_LIMIT_ENABLED: 'false' });
    two = await filesApp({ config: { MONGODB_URI: uri } });
    a = await tenant(two);
  }, 60_000);
  afterAll(async () => {
    await one?.stop('SIGTERM');
    await two?.close();
  });

  it('an upload started on one server resumes on the other from the stored offset', async () => {
    const data = randomBytes(600_000);
    const loc = await create(one, a.key, data.length);
    expect((await patch(one, a.key, loc, 0, data.subarray(0, 250_000))).status).toBe(204);
    expect(await offsetOn(two, a.key, loc)).toBe(250_000);
    const done = await patch(two, a.key, loc, 250_000, data.subarray(250_000));
    expect(done.status).toBe(204);
    const id = done.headers.get('upload-file-id')!;
    expect(sha256((await download(two, `/files/${id}/content`, { key: a.key })).bytes)).toBe(sha256(data));
  });

  it('while one server writes an upload, a PATCH on the other is refused (423) and the file is the winner’s bytes', async () => {
    const data = randomBytes(400_000);
    const other = randomBytes(400_000);
    const loc = await create(one, a.key, data.length);
    const id = loc.split('/').at(-1)!;
    const held = heldPatch(one, a.key, loc, data, 100_000);
    await waitFor(async () => ((await col(two, 'file_uploads').findOne({ _id: id as never })) as any)?.writer, 'the first PATCH to claim the upload');
    const loser = await patch(two, a.key, loc, 0, other);
    expect(loser.status).toBe(423);
    held.finish();
    const won = await held.answer;
    expect(won.status).toBe(204);
    expect(sha256((await download(two, `/files/${won.fileId!}/content`, { key: a.key })).bytes)).toBe(sha256(data));
    // Once the offset has moved, a PATCH at the old offset is the protocol's 409 (the upload is gone here: 404).
    expect([404, 409]).toContain((await patch(two, a.key, loc, 0, other)).status);
  });

  it('a PATCH at an offset another server has already passed is 409', async () => {
    const data = randomBytes(300_000);
    const loc = await create(two, a.key, data.length);
    expect((await patch(one, a.key, loc, 0, data.subarray(0, 100_000))).status).toBe(204);
    expect((await patch(two, a.key, loc, 0, data.subarray(0, 100_000))).status).toBe(409);
    expect(await offsetOn(one, a.key, loc)).toBe(100_000);
  });
});
