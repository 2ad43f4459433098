/**
 * Jobs plugin: trigger → running latency (p50, p99) and completed trivial jobs per second through
 * the plugin, against bare Agenda running the same trivial job on the same database with the same
 * concurrency and poll interval (aim: ratio >= 0.7). Both sides run in this process, one after
 * the other, alternating rounds so database drift cannot favour either.
 *
 * Standalone: `npx tsx bench/jobs.ts` (MONGODB_URI optional; an embedded MongoDB otherwise).
 * From bench/run.ts: `await benchJobs(MONGODB_URI)`.
 */
import { Agenda, InMemoryNotificationChannel, type Job } from 'agenda';
import { MongoBackend } from '@agendajs/mongo-backend';
import { MongoMemoryServer } from 'mongodb-memory-server';
import { Types } from 'mongoose';
import { loadConfig } from '../config/index.ts';
import { createApp } from '../core/kernel.ts';
import { createLogger } from '../core/logger.ts';
import { definePlugin } from '../core/plugin.ts';
import { systemActor } from '../core/context.ts';
import { jobsPlugin } from '../plugins/jobs/index.ts';
import { corePlugins } from '../builtin-plugins.ts';

const log = (s: string) => process.stdout.write(`${s}\n`);
const JOBS = Number(process.env.BENCH_JOBS ?? 500);
const LATENCY_SAMPLES = Number(process.env.BENCH_JOB_LATENCY_SAMPLES ?? 100);
const POLL_MS = 200;
const CONCURRENCY = Number(process.env.BENCH_JOB_CONCURRENCY ?? 10);
const SECRETS = { TOKEN_SECRET: 'bench-token-secret-0123456789abcdef0123456789', CURSOR_HMAC_SECRET: 'bench-cursor-secret-0123456789abcdef01234567' };

/** The trivial job both sides run. */
const trivial = async () => ({ ok: true });
const benchJobPlugin = definePlugin({ name: 'bench-jobs', setup: () => ({ jobs: [{ name: 'trivial', max_attempts: 1, run: trivial }] }) });

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Queue `n` items `fn(i)`, 20 at a time. */
async function queue(n: number, fn: (i: number) => Promise<unknown>) {
  let next = 0;
  await Promise.all(Array.from({ length: 20 }, async () => {
    while (next < n) await fn(next++);
  }));
}

export async function benchJobs(mongodbUri: string) {
  const uri = new URL(mongodbUri);
  uri.pathname = '/bench_jobs';
  const config = loadConfig({
    NODE_ENV: 'production', LOG_LEVEL: 'silent', MONGODB_URI: uri.toString(), ...SECRETS, RATE_LIMIT_ENABLED: 'false', AUDIT_LOG_ENABLED: 'false',
    METRICS_ENABLED: 'false', JOBS_ENABLED: 'true', JOBS_POLL_INTERVAL_MS: String(POLL_MS), JOBS_CONCURRENCY: String(CONCURRENCY),
  });
  const app = await createApp({ corePlugins: corePlugins(), config, plugins: [jobsPlugin, benchJobPlugin], logger: createLogger('silent') });
  const jobs = app.services.get('jobs');
  const runs = app.db.conn.collection('job_runs');
  const db = app.db.conn.db!;
  const rates: Record<string, number> = {};

  const viaPlugin = async (round: number) => {
    await runs.deleteMany({});
    const start = Date.now();
    await queue(JOBS, () => jobs.trigger('trivial', {}, { actor: systemActor() }));
    while ((await runs.countDocuments({ status: 'completed' })) < JOBS) await sleep(20);
    const rate = JOBS / ((Date.now() - start) / 1000);
    rates[`plugin #${round}`] = rate;
    log(`${`jobs plugin #${round}`.padEnd(28)} ${rate.toFixed(0).padStart(7)} jobs/s`);
  };

  const bare = async (round: number) => {
    const agenda = new Agenda({
      backend: new MongoBackend({ mongo: db, collection: 'bench_bare_agenda' }),
      notificationChannel: new InMemoryNotificationChannel(),
      processEvery: POLL_MS, maxConcurrency: CONCURRENCY * 2, defaultLockLifetime: 3_600_000,
    });
    let done = 0;
    agenda.define('trivial', async (_job: Job) => {
      await trivial();
      done++;
    }, { concurrency: CONCURRENCY, lockLimit: CONCURRENCY, removeOnComplete: true });
    await agenda.start();
    const start = Date.now();
    await queue(JOBS, () => agenda.now('trivial', {}));
    while (done < JOBS) await sleep(20);
    const rate = JOBS / ((Date.now() - start) / 1000);
    rates[`bare #${round}`] = rate;
    log(`${`bare agenda #${round}`.padEnd(28)} ${rate.toFixed(0).padStart(7)} jobs/s`);
    await agenda.stop(false);
  };

  try {
    for (const round of [0, 1]) {
      await bare(round);
      await viaPlugin(round);
    }
    // Latency: one run at a time, so the queue is empty; created_at and started_at come from this process's clock.
    await runs.deleteMany({});
    const lat: number[] = [];
    for (let i = 0; i < LATENCY_SAMPLES; i++) {
      const { run_id } = await jobs.trigger('trivial', {}, { actor: systemActor() });
      let r;
      while (!(r = await runs.findOne({ _id: new Types.ObjectId(run_id), status: 'completed' }))) await sleep(5);
      lat.push(r.started_at.getTime() - r.created_at.getTime());
    }
    const avg = (k: string) => (rates[`${k} #0`]! + rates[`${k} #1`]!) / 2;
    const summary = {
      'jobs: trigger -> running p50 (ms)': String(pct(lat, 50)),
      'jobs: trigger -> running p99 (ms)': String(pct(lat, 99)),
      'jobs: plugin jobs/s': avg('plugin').toFixed(0),
      'jobs: bare Agenda jobs/s': avg('bare').toFixed(0),
      'jobs: plugin vs bare Agenda throughput (aim >= 0.7)': (avg('plugin') / avg('bare')).toFixed(2),
    };
    log('\njobs (same run, same database):');
    for (const [k, v] of Object.entries(summary)) log(`  ${k.padEnd(66)} ${v}`);
    return { rates, summary };
  } finally {
    await app.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const mem = process.env.MONGODB_URI ? undefined : await MongoMemoryServer.create();
  try {
    await benchJobs(process.env.MONGODB_URI ?? mem!.getUri());
  } finally {
    await mem?.stop();
  }
  process.exit(0);
}
