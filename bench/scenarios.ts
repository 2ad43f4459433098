/**
 * The HTTP scenarios and the ratio arithmetic shared by `npm run bench` (bench/run.ts) and
 * `npm run bench:compare` (bench/compare.ts): one definition of what "get-one", "create" or
 * "update" sends, so a comparison between two trees measures exactly what the headline bench does.
 */
import { loadavg } from 'node:os';
import autocannon from 'autocannon';
import { patchRequests } from './seed.ts';

/** One scenario's load; `before` runs before each measurement (e.g. to read the documents' versions again). */
export type Load = Omit<autocannon.Options, 'url'> & { path: string; before?: () => Promise<void> };

export const log = (s: string) => process.stdout.write(`${s}\n`);
export const loadAvg = () => loadavg().map((l) => l.toFixed(1)).join(' ');

export const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/**
 * Requests per second of one autocannon run against `port`; throws when any answer is not 2xx (the
 * measurement would be invalid), unless `defaults.tolerateErrors`: then only 2xx answers count and
 * the others are logged (a request the server gives up on, e.g. at its query timeout, is no answer).
 */
export async function measureRate(label: string, port: number, opts: Load, defaults: { connections: number; duration: number; headers: Record<string, string>; tolerateErrors?: boolean }): Promise<number> {
  // A run bounded by `amount` stops at autocannon's next sample tick, so with the default 1 s tick
  // its length (and so its rate) is rounded up to whole seconds (the update runs of earlier benches
  // read 1,333, 666 or 444 req/s whatever their speed). A 20 ms tick keeps that error within 2%.
  const { before, ...load } = opts;
  await before?.();
  const r = await autocannon({ url: `http://127.0.0.1:${port}${load.path}`, connections: defaults.connections, duration: defaults.duration, headers: defaults.headers, ...(load.amount ? { sampleInt: 20 } : {}), ...load });
  const bad = r.non2xx + r.errors;
  const seconds = (new Date(r.finish).getTime() - new Date(r.start).getTime()) / 1000;
  const rate = (defaults.tolerateErrors ? r['2xx'] : r.requests.total) / seconds;
  const shown = rate >= 100 ? rate.toFixed(0) : rate.toPrecision(3);
  log(`  ${label.padEnd(36)} ${shown.padStart(7)} req/s   p99 ${r.latency.p99} ms${load.amount ? `   (${r.requests.total} in ${seconds.toFixed(1)} s)` : ''}${bad ? `   (${bad} non-2xx/errors!)` : ''}`);
  if (bad && !defaults.tolerateErrors) throw new Error(`${label}: ${bad} non-2xx responses or errors; the measurement is invalid`);
  return rate;
}

/** Median of the per-round ratios a / b, with the rounds (`rates` holds one rate per round per key). */
export function ratioOf(rates: Record<string, number[]>, a: string, b: string) {
  const xs = rates[a], ys = rates[b];
  if (!xs?.length || !ys?.length) return { median: null, rounds: [] as number[] };
  const rounds = xs.map((x, i) => x / ys[i]!);
  return { median: median(rounds), rounds };
}

export const showRatio = (r: { median: number | null; rounds: number[] }) =>
  r.median === null ? 'n/a' : `${r.median.toFixed(2)}  (rounds ${r.rounds.map((x) => x.toFixed(2)).join(', ')})`;

/**
 * The read and write scenarios of the headline bench. Reads: `/auth/me`, get-one, a 25-row list,
 * the same list over GraphQL. Writes: a create, and an update with `If-Match` at each document's
 * current version (no ETag round trip: the versions are tracked here).
 */
export function scenarios(seeded: { key: string; sampleId: string; updIds: string[] }, versionsNow?: () => Promise<[string, number][]>) {
  const json = { 'X-API-Key': seeded.key, 'Content-Type': 'application/json' };
  // GraphQL asks for every field REST returns, so both serialize the same documents.
  const gqlFields = '_id etag name description status tags budget owner_email tenant_id created_at updated_at created_by updated_by is_deleted deleted_at deleted_by version';
  const gqlBody = JSON.stringify({ query: `{ projects(per_page: 25) { total page per_page total_pages items { ${gqlFields} } } }` });
  const reads: Record<'auth/me' | 'get-one' | 'list' | 'graphql list', Load> = {
    'auth/me': { path: '/auth/me' },
    'get-one': { path: `/projects/${seeded.sampleId}` },
    list: { path: '/projects?per_page=25' },
    'graphql list': { path: '/graphql', method: 'POST', body: gqlBody, headers: json },
  };
  // Each side PATCHes its own share of the seeded documents in turn at their current version
  // (`patchRequests` keeps one version map for the whole run), so update runs are bounded by time
  // like the others. Own shares: a write that supersedes a document another process wrote last
  // cannot know that process's outbox entries are in the log, and freezes them; with shared
  // documents every side would pay for the entries of the side before it (the app for the floor's).
  // What writers sharing documents cost is measured on its own (`update, shared documents`).
  // A PATCH cut off at the end of a run may or may not have reached the database: with
  // `versionsNow`, the map is read from the database again before each run.
  const versions = new Map<string, number>();
  const before = versionsNow && (async () => {
    // The previous run's cut-off PATCHes may still be in the server: let them land first.
    await new Promise((r) => setTimeout(r, 500));
    versions.clear();
    for (const [id, v] of await versionsNow()) versions.set(id, v);
  });
  const updateOf = (ids: string[]): Load => ({ path: '/projects', headers: { 'X-API-Key': seeded.key }, requests: patchRequests(ids, versions), ...(before ? { before } : {}) });
  const shares = new Map<string, Load>();
  /** The update of `side` on its own documents: one of `sides` shares of the seeded ones. */
  const update = (sides: readonly string[]) => (side: string): Load => {
    let load = shares.get(side);
    if (!load) {
      const i = sides.indexOf(side);
      const n = Math.ceil(seeded.updIds.length / sides.length);
      shares.set(side, (load = updateOf(seeded.updIds.slice(i * n, (i + 1) * n))));
    }
    return load;
  };
  /** Every side on all the seeded documents: a write finds the entries another process left. */
  const updateShared = updateOf(seeded.updIds);
  const create: Load = { path: '/projects', method: 'POST', body: JSON.stringify({ name: 'bench create', tags: ['x'], budget: 1 }), headers: json };
  return { reads, create, update, updateShared };
}

/** Runs a bench's `main`: exit 0 when it is done (its servers may hold the loop), 1 with the stack when it fails. */
export function runBench(main: () => Promise<void>): void {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
      process.exit(1);
    },
  );
}

/**
 * A scenario: its name, the sides it runs on, its load (a function for one made anew per
 * measurement), and optionally a pair tag: adjacent scenarios with the same tag are compared with
 * each other, so their order swaps every other round.
 */
/** A scenario's load: the same for every side, or made for each side (a function of its name). */
export type Scenario<Side extends string> = [name: string, sides: Side[], load: Load | ((side: Side) => Load), pair?: string];

/**
 * A group in the order of one round: on odd rounds each run of adjacent scenarios sharing a pair tag
 * is reversed. Two scenarios on one side (the same server, other credentials) would otherwise run
 * in the same order every round, and the second would always inherit the first's garbage and the
 * database's recent work: a bias no number of rounds removes.
 */
export function roundOrder<S extends string>(group: Scenario<S>[], round: number): Scenario<S>[] {
  if (round % 2 === 0) return group;
  const out: Scenario<S>[] = [];
  for (let i = 0; i < group.length;) {
    let j = i + 1;
    const tag = group[i]![3];
    while (tag !== undefined && j < group.length && group[j]![3] === tag) j++;
    out.push(...group.slice(i, j).reverse());
    i = j;
  }
  return out;
}

/**
 * Measures each group of scenarios `rounds` times, a group's rounds before the next group's (writes
 * after reads: the documents they add would weigh on the lists). The sides' order rotates between
 * rounds so no side always runs first (database drift, caches), as do paired scenarios
 * ({@link roundOrder}); `wanted` filters by name.
 */
export async function runRounds<Side extends string>(
  groups: Scenario<Side>[][], rounds: number, wanted: (name: string) => boolean, measure: (name: string, side: Side, load: Load) => Promise<void>,
): Promise<void> {
  for (const group of groups) {
    if (!group.some(([name]) => wanted(name))) continue;
    for (let round = 0; round < rounds; round++) {
      log(`round ${round + 1}/${rounds} (load average ${loadAvg()})`);
      for (const [name, sides, load] of roundOrder(group, round)) {
        if (!wanted(name)) continue;
        const order = sides.map((_, i) => sides[(i + round) % sides.length]!);
        for (const side of order) await measure(name, side, typeof load === 'function' ? load(side) : load);
      }
    }
  }
}
