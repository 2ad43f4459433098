import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, uniqueDbUri } from '../helpers/app.ts';
import { startServerProcess, type ServerProcess } from '../helpers/processes.ts';
import { ROOT } from './helpers.ts';

const run = promisify(execFile);
const TSC = join(ROOT, 'node_modules/.bin/tsc');

/**
 * A plugin in its own repository, as a user writes it: a resource, a route, a job and a GraphQL
 * field, everything (zod and mongoose included) from 'plugin-api-server'.
 */
const OUTSIDE_PLUGIN = `import { definePlugin, defineResource, defineRoute, Schema, z, type JobDefinition } from 'plugin-api-server';

const countParams = z.object({ n: z.number().int().min(1).default(1) }).strict();
const countJob: JobDefinition<typeof countParams> = {
  name: 'outside_count',
  description: 'Counts to n',
  params: countParams,
  async run(ctx, { n }) {
    ctx.log(\`counted to \${n}\`);
    return { n };
  },
};

export default definePlugin({
  name: 'outside',
  dependsOn: ['resources'],
  setup({ services }) {
    services.get('resources').register(defineResource({ name: 'gadgets', schema: new Schema({ label: { type: String, required: true } }) }));
    return {
      routes: [
        defineRoute({
          method: 'POST', path: '/outside/echo', auth: 'public', summary: 'Echoes a word',
          body: z.object({ word: z.string().min(1) }).strict(),
          handler: ({ body }) => ({ echoed: body.word.toUpperCase() }),
        }),
      ],
      jobs: [countJob],
      graphql: (builder) => builder.queryField('outsideHello', (t) => t.string({ nullable: false, resolve: () => 'hello from outside' })),
    };
  },
});
`;

const TSCONFIG = {
  compilerOptions: {
    target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, skipLibCheck: true,
    verbatimModuleSyntax: true, allowImportingTsExtensions: true, noEmit: true, types: [],
  },
  include: ['*.ts', 'test/**/*.ts'],
};

/**
 * What `npm install <path to this repository>` leaves in node_modules: a symlink to the checkout
 * (npm links a local folder rather than copying it). Made by hand so the test needs neither npm
 * nor the network; vitest stands for the scaffold's devDependency.
 */
async function link(dir: string, withVitest = false) {
  await mkdir(join(dir, 'node_modules'), { recursive: true });
  await symlink(ROOT, join(dir, 'node_modules/plugin-api-server'), 'dir');
  if (withVitest) await symlink(join(ROOT, 'node_modules/vitest'), join(dir, 'node_modules/vitest'), 'dir');
}

let work: string;
let outside: string;
let scaffolded: string;
let server: ServerProcess | undefined;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'dx-outside-'));
  outside = join(work, 'outside-plugin');
  scaffolded = join(work, 'tickets');
  await mkdir(outside);
  await writeFile(join(outside, 'package.json'), JSON.stringify({ name: 'outside-plugin', type: 'module', private: true, dependencies: { 'plugin-api-server': `file:${ROOT}` } }));
  await writeFile(join(outside, 'tsconfig.json'), JSON.stringify(TSCONFIG));
  await writeFile(join(outside, 'index.ts'), OUTSIDE_PLUGIN);
  await link(outside);
  // The scaffold, run as `npm run new-plugin -- tickets --dir <path>` runs it.
  const res = await run(process.execPath, ['--import', 'tsx', 'scripts/new-plugin.ts', 'tickets', '--dir', scaffolded], { cwd: ROOT });
  expect(res.stdout).toContain('Wrote 9 files');
  await link(scaffolded, true);
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await rm(work, { recursive: true, force: true });
});

describe('a plugin outside the repository', () => {
  it('type-checks with tsc from its own folder (hand-written and scaffolded)', async () => {
    const check = (dir: string) => run(TSC, ['--noEmit', '-p', dir], { cwd: dir }).then(
      () => '',
      (err: { stdout?: string }) => err.stdout ?? String(err),
    );
    const [a, b] = await Promise.all([check(outside), check(scaffolded)]);
    expect(a).toBe('');
    expect(b).toBe('');
  }, 300_000);

  it("the scaffold's own test passes when run from its folder, as `npm test` runs it there", async () => {
    // Its vitest.config.ts keeps one graphql (without it: "Cannot use GraphQLSchema ... from another module or realm").
    const res = await run(process.execPath, [join(ROOT, 'node_modules/vitest/vitest.mjs'), 'run', '--reporter=dot'], {
      cwd: scaffolded, env: { ...process.env, MONGODB_URI: uniqueDbUri(), CI: 'true' },
    }).catch((err: { stdout?: string; stderr?: string }) => ({ stdout: `${err.stdout ?? ''}${err.stderr ?? String(err)}`, stderr: '' }));
    expect(res.stdout).toMatch(/Tests\s+.*2 passed/);
    expect(res.stdout).not.toMatch(/failed/);
  }, 120_000);

  it('loads through PLUGINS in a real server: its route, resource, job and GraphQL field answer', async () => {
    server = await startServerProcess(
      { MONGODB_URI: uniqueDbUri(), JOBS_ENABLED: 'true', PLUGINS: `${join(outside, 'index.ts')},${join(scaffolded, 'index.ts')}` },
      { timeoutMs: 90_000 },
    );
    const call = async (method: string, path: string, json?: unknown) => {
      const res = await fetch(server!.url + path, {
        method, headers: { 'X-API-Key': ADMIN_KEY, ...(json ? { 'Content-Type': 'application/json' } : {}) }, ...(json ? { body: JSON.stringify(json) } : {}),
      });
      return { status: res.status, body: (await res.json()) as any };
    };
    expect(await call('POST', '/outside/echo', { word: 'hi' })).toEqual({ status: 200, body: { echoed: 'HI' } });
    expect((await call('POST', '/outside/echo', { word: '' })).body.error.code).toBe('VALIDATION_ERROR');
    expect((await call('GET', '/gadgets')).status).toBe(200);
    expect((await call('GET', '/jobs/registry/outside_count')).body).toMatchObject({ name: 'outside_count', plugin: 'outside' });
    expect((await call('POST', '/graphql', { query: '{ outsideHello }' })).body).toEqual({ data: { outsideHello: 'hello from outside' } });
    // The scaffolded plugin: the template's routes under its own name.
    expect((await call('GET', '/tickets')).body).toMatchObject({ items: [], total: 0 });
    expect((await call('GET', '/jobs/registry/archive_old_tickets')).status).toBe(200);
    expect((await call('POST', '/graphql', { query: '{ tickets { total } }' })).body).toEqual({ data: { tickets: { total: 0 } } });
  }, 120_000);
});
