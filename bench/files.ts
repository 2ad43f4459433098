/**
 * Files plugin against bare GridFS handlers, in the same process on the same database:
 *
 * - upload throughput of 10 MB files (`POST /files`, multipart) vs a bare handler piping the
 *   request into a GridFS upload stream (aim >= 0.8);
 * - download of the same files (`GET /files/{id}/content`) vs a bare GridFS download stream piped
 *   to the response (aim >= 0.8);
 * - RSS growth while one 1 GB file is uploaded, its bytes generated as a stream (aim < 64 MB);
 * - 100 parallel 1 MB uploads: all stored, each sha256 matching what was sent.
 *
 * Rounds alternate which side goes first; each ratio is the median of the per-round ratios.
 * Standalone: `npm run bench:files` (MONGODB_URI optional; an embedded MongoDB otherwise); from
 * bench/run.ts (`npm run bench`, or `BENCH_ONLY=files`): `await benchFiles(MONGODB_URI)`.
 * BENCH_FILES_ROUNDS (3), BENCH_FILES_COUNT (files per round, 12), BENCH_FILES_BIG_MB (1024).
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { MongoMemoryServer } from 'mongodb-memory-server';
import { mongo } from 'mongoose';
import { loadConfig } from '../config/index.ts';
import { builtinPlugins, corePlugins } from '../builtin-plugins.ts';
import { createApp } from '../core/kernel.ts';
import { createLogger } from '../core/logger.ts';

const log = (s: string) => process.stdout.write(`${s}\n`);
const ROUNDS = Number(process.env.BENCH_FILES_ROUNDS ?? 3);
const COUNT = Number(process.env.BENCH_FILES_COUNT ?? 12);
const CONCURRENCY = Number(process.env.BENCH_FILES_CONCURRENCY ?? 4);
const MB = 1024 * 1024;
const BIG_MB = Number(process.env.BENCH_FILES_BIG_MB ?? 1024);
const ADMIN_KEY = 'bench-admin-key-0123456789abcdef';
const SECRETS = { TOKEN_SECRET: 'bench-token-secret-0123456789abcdef0123456789', CURSOR_HMAC_SECRET: 'bench-cursor-secret-0123456789abcdef01234567' };
const BOUNDARY = 'bench-boundary-7f3a9c';
const HEAD = Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="bench.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`);
const TAIL = Buffer.from(`\r\n--${BOUNDARY}--\r\n`);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** Sends `body` (chunks) to `path`; resolves to the status and the answer's text (a download's is drained and only counted). */
function send(port: number, method: string, path: string, headers: Record<string, string>, body: Iterable<Buffer> | AsyncIterable<Buffer> | null): Promise<{ status: number; text: string; bytes: number }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers }, (res) => {
      const keep: Buffer[] = [];
      let bytes = 0;
      res.on('data', (c: Buffer) => {
        bytes += c.length;
        if (method !== 'GET') keep.push(c);
      });
      res.on('end', () => resolve({ status: res.statusCode!, text: Buffer.concat(keep).toString(), bytes }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (!body) req.end();
    else Readable.from(body).pipe(req);
  });
}

const multipart = (bytes: Buffer) => ({ headers: { 'Content-Type': `multipart/form-data; boundary=${BOUNDARY}`, 'Content-Length': String(HEAD.length + bytes.length + TAIL.length) }, body: [HEAD, bytes, TAIL] });

/** `n` tasks, `c` at a time. */
async function pool(n: number, c: number, fn: (i: number) => Promise<void>) {
  let next = 0;
  await Promise.all(Array.from({ length: c }, async () => {
    while (next < n) await fn(next++);
  }));
}

/** The bare side: the request piped into a GridFS upload stream; a GridFS download stream piped to the response. */
function bareServer(db: mongo.Db): Promise<Server> {
  const upBucket = new mongo.GridFSBucket(db, { bucketName: 'bench_bare' });
  const downBucket = new mongo.GridFSBucket(db, { bucketName: 'file_bytes' });
  const server = createServer((req, res) => {
    if (req.method === 'POST') {
      const up = upBucket.openUploadStream(`bare-${randomBytes(6).toString('hex')}`);
      req.pipe(up).on('finish', () => res.writeHead(201, { 'Content-Type': 'application/json' }).end(JSON.stringify({ _id: String(up.id) })));
      up.on('error', () => res.writeHead(500).end());
      return;
    }
    const key = decodeURIComponent(req.url!.slice(1));
    res.writeHead(200, { 'Content-Type': 'application/octet-stream' });
    downBucket.openDownloadStreamByName(key).on('error', () => res.destroy()).pipe(res);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

export async function benchFiles(mongodbUri: string) {
  const uri = new URL(mongodbUri);
  uri.pathname = '/bench_files';
  const config = loadConfig({
    NODE_ENV: 'production', LOG_LEVEL: 'silent', MONGODB_URI: uri.toString(), ADMIN_API_KEY: ADMIN_KEY, ...SECRETS,
    FILES_ENABLED: 'true', FILES_MAX_BYTES: String((BIG_MB + 16) * MB), RATE_LIMIT_ENABLED: 'false', METRICS_ENABLED: 'false',
  });
  const app = await createApp({ corePlugins: corePlugins(), config, plugins: builtinPlugins(), logger: createLogger('silent') });
  const db = app.db.conn.db!;
  for (const c of ['files', 'file_usage', 'file_bytes.files', 'file_bytes.chunks', 'bench_bare.files', 'bench_bare.chunks']) await db.collection(c).deleteMany({});
  const identity = app.services.get('identity');
  const admin = await identity.authenticateApiKey(ADMIN_KEY);
  const tenant = await identity.createTenant(admin, { name: `bench-files-${randomBytes(3).toString('hex')}` });
  const user = await identity.createUser(admin, { email: `files-${randomBytes(3).toString('hex')}@example.com`, name: 'Bench', tenant_id: tenant.id, roles: ['user'] });
  const { key } = await identity.createApiKey(admin, { user_id: user.id, name: 'bench' });
  const auth = { 'X-API-Key': key };
  const appPort = await app.listen(0, '127.0.0.1');
  const bare = await bareServer(db);
  const barePort = (bare.address() as AddressInfo).port;
  const summary: Record<string, unknown> = {};
  const file = randomBytes(10 * MB);

  try {
    // Warm-up: one upload and download each.
    const warm = JSON.parse((await send(appPort, 'POST', '/files', { ...auth, ...multipart(file).headers }, multipart(file).body)).text) as { _id: string };
    await send(appPort, 'GET', `/files/${warm._id}/content`, auth, null);
    await send(barePort, 'POST', '/', multipart(file).headers, multipart(file).body);

    // First, so the baseline is the server as started (no earlier upload's buffers in the heap).
    // One big file, generated as a stream: the same 1 MB block repeated (the hash covers every byte).
    const block = randomBytes(MB);
    const expected = createHash('sha256');
    for (let i = 0; i < BIG_MB; i++) expected.update(block);
    await new Promise((r) => setTimeout(r, 500));
    const before = process.memoryUsage().rss;
    let peak = before;
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage().rss);
    }, 50);
    async function* big() {
      yield HEAD;
      for (let i = 0; i < BIG_MB; i++) yield block;
      yield TAIL;
    }
    const t0 = performance.now();
    const bigRes = await send(appPort, 'POST', '/files', { ...auth, 'Content-Type': `multipart/form-data; boundary=${BOUNDARY}`, 'Content-Length': String(HEAD.length + BIG_MB * MB + TAIL.length) }, big());
    clearInterval(sampler);
    const bigFile = JSON.parse(bigRes.text) as { size: number; sha256: string };
    if (bigRes.status !== 201 || bigFile.sha256 !== expected.digest('hex') || bigFile.size !== BIG_MB * MB) throw new Error(`big upload: ${bigRes.status} ${bigRes.text.slice(0, 200)}`);
    summary[`RSS growth uploading one ${BIG_MB} MB file, MB (aim < 64)`] = Math.round((peak - before) / MB);
    summary[`${BIG_MB} MB upload MB/s`] = Math.round(BIG_MB / ((performance.now() - t0) / 1000));
    log(`one ${BIG_MB} MB upload: RSS ${Math.round(before / MB)} → peak ${Math.round(peak / MB)} MB`);

    const upRatios: number[] = [];
    const downRatios: number[] = [];
    const rates: Record<string, number[]> = {};
    for (let round = 0; round < ROUNDS; round++) {
      const ids: string[] = [];
      const uploadOn = async (side: 'app' | 'bare') => {
        const t0 = performance.now();
        await pool(COUNT, CONCURRENCY, async () => {
          const m = multipart(file);
          const r = await send(side === 'app' ? appPort : barePort, 'POST', side === 'app' ? '/files' : '/', { ...(side === 'app' ? auth : {}), ...m.headers }, m.body);
          if (r.status !== 201) throw new Error(`${side} upload: ${r.status} ${r.text.slice(0, 200)}`);
          if (side === 'app') ids.push((JSON.parse(r.text) as { _id: string })._id);
        });
        return (COUNT * 10) / ((performance.now() - t0) / 1000);
      };
      const downloadOn = async (side: 'app' | 'bare') => {
        const t0 = performance.now();
        await pool(ids.length, CONCURRENCY, async (i) => {
          const path = side === 'app' ? `/files/${ids[i]!}/content` : `/${encodeURIComponent(`${tenant.id}/${ids[i]!}`)}`;
          const r = await send(side === 'app' ? appPort : barePort, 'GET', path, side === 'app' ? auth : {}, null);
          if (r.status !== 200 || r.bytes !== file.length) throw new Error(`${side} download: ${r.status}, ${r.bytes} bytes`);
        });
        return (ids.length * 10) / ((performance.now() - t0) / 1000);
      };
      const order = round % 2 ? (['bare', 'app'] as const) : (['app', 'bare'] as const);
      const up: Record<string, number> = {};
      for (const side of order) up[side] = await uploadOn(side);
      const down: Record<string, number> = {};
      for (const side of order) down[side] = await downloadOn(side);
      for (const [k, v] of Object.entries({ 'app upload MB/s': up.app!, 'bare upload MB/s': up.bare!, 'app download MB/s': down.app!, 'bare download MB/s': down.bare! })) (rates[k] ??= []).push(Math.round(v));
      upRatios.push(up.app! / up.bare!);
      downRatios.push(down.app! / down.bare!);
      log(`round ${round + 1}: upload app ${up.app!.toFixed(0)} MB/s, bare ${up.bare!.toFixed(0)} MB/s; download app ${down.app!.toFixed(0)} MB/s, bare ${down.bare!.toFixed(0)} MB/s`);
    }
    summary['upload 10 MB files vs bare GridFS stream (aim >= 0.8)'] = Number(median(upRatios).toFixed(2));
    summary['download 10 MB files vs bare GridFS stream (aim >= 0.8)'] = Number(median(downRatios).toFixed(2));
    summary.rounds = { upload: upRatios.map((r) => Number(r.toFixed(2))), download: downRatios.map((r) => Number(r.toFixed(2))) };
    summary.rates = rates;

    // 100 parallel 1 MB uploads, each of its own bytes.
    const many = Array.from({ length: 100 }, () => randomBytes(MB));
    const answers = await Promise.all(many.map(async (b) => {
      const m = multipart(b);
      const r = await send(appPort, 'POST', '/files', { ...auth, ...m.headers }, m.body);
      return { status: r.status, doc: r.status === 201 ? (JSON.parse(r.text) as { _id: string; sha256: string }) : null };
    }));
    let matching = 0;
    for (const [i, a] of answers.entries()) {
      if (a.status !== 201 || a.doc!.sha256 !== sha(many[i]!)) continue;
      const stored = await db.collection('files').findOne({ _id: new mongo.ObjectId(a.doc!._id), status: 'ready' });
      const back = await send(appPort, 'GET', `/files/${a.doc!._id}/content`, auth, null);
      if (stored?.sha256 === sha(many[i]!) && back.bytes === MB) matching++;
    }
    summary['100 parallel 1 MB uploads stored with matching sha256 (aim 100)'] = matching;
  } finally {
    bare.close();
    await app.close();
  }
  log('\nfiles:');
  for (const [k, v] of Object.entries(summary)) log(`  ${k.padEnd(64)} ${JSON.stringify(v)}`);
  return { summary };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const mem = process.env.MONGODB_URI ? undefined : await MongoMemoryServer.create();
  try {
    await benchFiles(process.env.MONGODB_URI ?? mem!.getUri());
  } finally {
    await mem?.stop();
  }
  process.exit(0);
}
