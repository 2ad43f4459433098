/**
 * `npm run new-plugin -- <name> [--dir <path>]`: writes a working plugin copied from the template
 * (docs/examples/notes) with its test, its identifiers renamed after `<name>` and its imports
 * taken from the public entry point `plugin-api-server`.
 *
 * - Without `--dir`: `plugins/<name>/` in this repository, its test in `test/<name>/`; enable it
 *   with `PLUGINS=./plugins/<name>/index.ts` or in builtin-plugins.ts.
 * - With `--dir`: a plugin package in its own folder (package.json, tsconfig.json, the plugin,
 *   `test/plugin.test.ts`); `npm install <path to this repository>` there links the server.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const ROOT = resolve(import.meta.dirname, '..');
const TEMPLATE = join(ROOT, 'docs/examples/notes');
const NAME = /^[a-z][a-z0-9]*(-[a-z0-9]+)*$/;

interface Names { kebab: string; snake: string; camel: string; pascal: string; upper: string }

const names = (kebab: string): Names => {
  const parts = kebab.split('-');
  const pascal = parts.map((p) => p[0]!.toUpperCase() + p.slice(1)).join('');
  return { kebab, snake: parts.join('_'), camel: pascal[0]!.toLowerCase() + pascal.slice(1), pascal, upper: parts.join('_').toUpperCase() };
};

/** Renames the template's notes/note identifiers, strings and paths after the new plugin's name. */
export function rename(source: string, name: string): string {
  const singular = name.endsWith('s') ? name.slice(0, -1) : name;
  const many = names(`${singular}s`);
  const one = names(singular);
  return source
    .replace(/name: 'notes'/g, `name: '${name}'`)
    .replace(/'\/notes/g, `'/${many.kebab}`)
    .replace(/(?<=[a-z]_)notes\b|\bnotes(?=_[a-z])/g, many.snake)
    .replace(/(?<=[a-z]_)note\b|\bnote(?=_[a-z])/g, one.snake)
    .replace(/NOTES/g, many.upper).replace(/NOTE/g, one.upper)
    .replace(/Notes/g, many.pascal).replace(/Note/g, one.pascal)
    .replace(/notes/g, many.camel).replace(/note/g, one.camel);
}

/** Kernel, helper (lib/), settings, plugins' public/ contracts, zod and mongoose imports become one import from the public entry point. */
export function publicImports(source: string): string {
  const specifiers: string[] = [];
  let at = -1;
  const lines = source.split('\n').filter((line, i) => {
    const m = /^import (type )?\{ (.+) \} from '(\.\.\/\.\.\/\.\.\/(?:core|lib|config|plugins\/[a-z0-9-]+\/public)\/[^']+|zod|mongoose)';$/.exec(line);
    if (!m) return true;
    if (at < 0) at = i;
    for (const s of m[2]!.split(',').map((x) => x.trim())) specifiers.push(m[1] && !s.startsWith('type ') ? `type ${s}` : s);
    return false;
  });
  if (at >= 0) {
    const unique = [...new Set(specifiers)].sort((a, b) => a.replace(/^type /, '').localeCompare(b.replace(/^type /, '')));
    const allTypes = unique.every((s) => s.startsWith('type '));
    const list = allTypes ? unique.map((s) => s.slice(5)) : unique;
    lines.splice(at, 0, `import ${allTypes ? 'type ' : ''}{ ${list.join(', ')} } from 'plugin-api-server';`);
  }
  // Declaration merging targets the modules that declare Services and HookEvents (see docs/plugins.md).
  return lines.join('\n').replace(/declare module '\.\.\/\.\.\/\.\.\/core\/(services|hooks)\.ts'/g, "declare module 'plugin-api-server/$1'");
}

/** The generated plugin's own test: its routes and GraphQL through a real server, tenant by tenant. */
function pluginTest(name: string, importPath: string, testingPath: string): string {
  const singular = name.endsWith('s') ? name.slice(0, -1) : name;
  const many = names(`${singular}s`);
  return `import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '${testingPath}';
import { ${many.camel}Plugin } from '${importPath}';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ plugins: [${many.camel}Plugin] });
});
afterAll(() => s?.close());

describe('${name}', () => {
  it('creates and lists within the tenant, REST and GraphQL alike', async () => {
    const a = await s.tenantUser();
    const b = await s.tenantUser();
    const created = await s.http('POST', '/${many.kebab}', { key: a.key, json: { title: 'First' } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ title: 'First', tenant_id: a.tenantId });

    const mine = await s.http('GET', '/${many.kebab}', { key: a.key });
    expect(mine.body.items.map((n: { title: string }) => n.title)).toEqual(['First']);
    const theirs = await s.http('GET', '/${many.kebab}', { key: b.key });
    expect(theirs.body.items).toEqual([]);

    const gql = await s.gql('{ ${many.camel} { total items { title } } }', {}, { key: b.key });
    expect(gql.body.data).toEqual({ ${many.camel}: { total: 0, items: [] } });
  });

  it('refuses a bad body with 422 and writes nothing', async () => {
    const a = await s.tenantUser();
    const res = await s.http('POST', '/${many.kebab}', { key: a.key, json: { title: '' } });
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect((await s.http('GET', '/${many.kebab}', { key: a.key })).body.total).toBe(0);
  });
});
`;
}

const tsconfig = {
  compilerOptions: {
    target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', lib: ['ES2023'], strict: true,
    noUncheckedIndexedAccess: true, noImplicitOverride: true, skipLibCheck: true, esModuleInterop: true,
    isolatedModules: true, verbatimModuleSyntax: true, allowImportingTsExtensions: true, noEmit: true, types: [],
  },
  include: ['*.ts', 'test/**/*.ts'],
};

/**
 * The outside plugin's vitest config. Without it its test fails before it starts ("Cannot use
 * GraphQLSchema ... from another module or realm"): Vite loads graphql's ES build for the files it
 * transforms while Node gives Pothos and Yoga the CommonJS build, so the server's own
 * vitest.config.ts makes the same alias. graphql is the server's dependency, so it resolves from there.
 */
const VITEST_CONFIG = `import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { defineConfig } from 'vitest/config';

const require = createRequire(import.meta.url);
const server = dirname(require.resolve('plugin-api-server/package.json'));

export default defineConfig({
  resolve: {
    // One graphql for the server and this plugin: Vite would load graphql's ES build while Node
    // gives Pothos and Yoga its CommonJS build, and \`instanceof GraphQLSchema\` fails across the two.
    alias: [{ find: /^graphql$/, replacement: require.resolve('graphql', { paths: [server] }) }],
  },
  test: { testTimeout: 30_000, hookTimeout: 60_000 },
});
`;

export interface ScaffoldResult { dir: string; files: string[] }

/** Writes the plugin; refuses a bad name or an existing target folder. */
export function scaffold(name: string, opts: { dir?: string } = {}): ScaffoldResult {
  if (!NAME.test(name)) throw new Error(`"${name}" is not a plugin name: use kebab-case, e.g. "support-tickets"`);
  const outside = opts.dir !== undefined;
  const dir = outside ? resolve(opts.dir!) : join(ROOT, 'plugins', name);
  if (existsSync(dir) && readdirSync(dir).length) throw new Error(`${dir} exists and is not empty`);
  const files: string[] = [];
  const write = (path: string, text: string) => {
    mkdirSync(join(path, '..'), { recursive: true });
    writeFileSync(path, text);
    files.push(path);
  };
  for (const file of readdirSync(TEMPLATE).filter((f) => f.endsWith('.ts'))) {
    write(join(dir, file), publicImports(rename(readFileSync(join(TEMPLATE, file), 'utf8'), name)));
  }
  if (outside) {
    write(join(dir, 'test/plugin.test.ts'), pluginTest(name, '../index.ts', 'plugin-api-server/testing'));
    const pkg = {
      name, version: '0.1.0', private: true, type: 'module', exports: { '.': './index.ts' },
      scripts: { typecheck: 'tsc --noEmit', test: 'vitest run' },
      peerDependencies: { 'plugin-api-server': '*' },
      devDependencies: { typescript: '5.9', vitest: '^4.1.12' },
    };
    write(join(dir, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
    write(join(dir, 'tsconfig.json'), `${JSON.stringify(tsconfig, null, 2)}\n`);
    write(join(dir, 'vitest.config.ts'), VITEST_CONFIG);
  } else {
    write(join(ROOT, 'test', name, 'plugin.test.ts'), pluginTest(name, `../../plugins/${name}/index.ts`, '../../testing.ts'));
  }
  return { dir, files };
}

function main(argv: string[]) {
  const dirAt = argv.indexOf('--dir');
  const dir = dirAt >= 0 ? argv[dirAt + 1] : undefined;
  const name = argv.filter((_, i) => dirAt < 0 || (i !== dirAt && i !== dirAt + 1))[0];
  if (!name || (dirAt >= 0 && !dir)) {
    process.stderr.write('usage: npm run new-plugin -- <name> [--dir <path>]\n');
    process.exit(2);
  }
  try {
    const res = scaffold(name, dir === undefined ? {} : { dir });
    const where = relative(process.cwd(), res.dir) || '.';
    const next = dir === undefined
      ? `Enable it with PLUGINS=./plugins/${name}/index.ts (or add it to builtin-plugins.ts); its test: npx vitest run test/${name}`
      : `Next: cd ${where} && npm install ${ROOT} && npx tsc --noEmit && npm test; run the server with PLUGINS=${resolve(res.dir, 'index.ts')}`;
    process.stdout.write(`Wrote ${res.files.length} files in ${where}.\n${next}\n`);
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) main(process.argv.slice(2));
