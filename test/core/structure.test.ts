import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

/**
 * The plugin layout of docs/plugins.md "Layout", checked on the tree itself: which files every
 * plugin folder has, how long a production file may grow, and that index.ts stays wiring. The
 * import rules of the same layout are ESLint's (eslint.config.js, test/core/lint.test.ts).
 */
const ROOT = resolve(import.meta.dirname, '../..');

/** Longest production file (core/, lib/, plugins/, config/, server.ts and the plugin list beside it). */
const MAX_LINES = 450;
/** Longest `index.ts` of a plugin: it only wires; routes move to routes.ts past this. */
const MAX_INDEX_LINES = 150;
/**
 * Most lines in `core/`, the kernel: plugin loading, configuration, the HTTP and GraphQL pipeline,
 * errors, the database connection, logging, metrics and tracing, and the contracts it reads. What
 * plugins share among themselves is published in a plugin's `public/` folder; domain code is a plugin.
 */
const MAX_CORE_LINES = 4000;

/**
 * Production files allowed over MAX_LINES, path → why it is one job that would only get harder to
 * read split. Keep it short; a stale entry (file gone or back under the limit) fails the test.
 */
const OVER_MAX_LINES: Record<string, string> = {};

/** Files of the layout a plugin may lack, plugin → file → why. */
const LAYOUT_EXCEPTIONS: Record<string, Record<string, string>> = {
  resources: {
    'schemas.ts': 'its zod schemas are generated per registered resource from the resource\'s mongoose schema (define.ts, fields.ts, query.ts), not written by hand',
    'model.ts': 'owns no collection: it serves the collections of the resources other plugins register, each defined with its own mongoose schema',
  },
  openapi: {
    'schemas.ts': 'takes no client input of its own: it serves the generated document and the static files of /docs',
  },
  idempotency: {
    'service.ts': "its store wraps requests (http.ts): the kernel's pipeline is its only caller, through the core contract core/idempotency.ts",
    'schemas.ts': 'has no routes or input of its own: the key is a header of other operations',
  },
  'rate-limit': {
    'schemas.ts': 'has no routes or input of its own: it counts the requests of the others, which the kernel\'s pipeline hands it through the core contract core/rate-limit.ts',
  },
};

const WIRING = ['index.ts', 'routes.ts', 'rest.ts', 'graphql.ts', 'http.ts', 'yoga.ts'];

/** Every .ts file under `dir` (recursive), as paths relative to the repository root. */
function tsFiles(dir: string): string[] {
  const abs = join(ROOT, dir);
  if (!existsSync(abs)) return [];
  if (statSync(abs).isFile()) return dir.endsWith('.ts') ? [dir] : [];
  return readdirSync(abs, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? tsFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');
const lineCount = (file: string) => {
  const text = read(file);
  return text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
};
/** Source without comments, so an `@example` in JSDoc is not taken for code. */
const code = (file: string) => read(file).replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');

const pluginDirs = readdirSync(join(ROOT, 'plugins'), { withFileTypes: true })
  .filter((e) => e.isDirectory())
  .map((e) => `plugins/${e.name}`);
/** The plugins and the template every new plugin copies. */
const layoutDirs = [...pluginDirs, 'docs/examples/notes'];
const nameOf = (dir: string) => dir.split('/').at(-1)!;

/**
 * The files `dir` must have: index.ts, service.ts and schemas.ts always; graphql.ts when it
 * contributes GraphQL (`graphql: (builder) => ...`); model.ts when it defines a mongoose schema
 * (it stores data), and `new Schema(` nowhere else.
 */
function missingFiles(dir: string): string[] {
  const files = tsFiles(dir).map((f) => relative(dir, f));
  const sources = files.map((f) => ({ f, src: code(join(dir, f)) }));
  const required = ['index.ts', 'service.ts', 'schemas.ts'];
  if (sources.some(({ src }) => /\bgraphql:\s*\(/.test(src))) required.push('graphql.ts');
  if (sources.some(({ src }) => /\bnew Schema\s*[(<]/.test(src))) required.push('model.ts');
  const excused = LAYOUT_EXCEPTIONS[nameOf(dir)] ?? {};
  return required.filter((f) => !files.includes(f) && !excused[f]);
}

describe('plugin layout (docs/plugins.md "Layout")', () => {
  it('finds the plugins and the template', () => {
    expect(pluginDirs.length).toBeGreaterThanOrEqual(8);
    expect(existsSync(join(ROOT, 'docs/examples/notes/index.ts'))).toBe(true);
  });

  it.each(layoutDirs)('%s has index.ts, service.ts, schemas.ts, and graphql.ts / model.ts when it contributes GraphQL / stores data', (dir) => {
    expect(missingFiles(dir)).toEqual([]);
  });

  it.each(layoutDirs)('%s: mongoose schemas only in model.ts', (dir) => {
    if (LAYOUT_EXCEPTIONS[nameOf(dir)]?.['model.ts']) return;
    const outside = tsFiles(dir).filter((f) => !f.endsWith('/model.ts') && /\bnew Schema\s*[(<]/.test(code(f)));
    expect(outside).toEqual([]);
  });

  it('every exception names an existing plugin and a file it really lacks', () => {
    for (const [plugin, files] of Object.entries(LAYOUT_EXCEPTIONS)) {
      expect(pluginDirs, plugin).toContain(`plugins/${plugin}`);
      for (const f of Object.keys(files)) expect(existsSync(join(ROOT, 'plugins', plugin, f)), `${plugin}/${f} exists: drop its exception`).toBe(false);
    }
  });

  it.each(layoutDirs)(`%s/index.ts only wires: at most ${MAX_INDEX_LINES} lines, no class`, (dir) => {
    const index = join(dir, 'index.ts');
    expect(lineCount(index), index).toBeLessThanOrEqual(MAX_INDEX_LINES);
    expect(code(index)).not.toMatch(/^\s*(export\s+)?(abstract\s+)?class\s/m);
  });

  it('every plugin folder is under the import rules of eslint.config.js', async () => {
    const eslint = new ESLint({ cwd: ROOT });
    for (const dir of layoutDirs) {
      const service = await eslint.calculateConfigForFile(join(ROOT, dir, 'service.ts'));
      const patterns = JSON.stringify(service.rules?.['@typescript-eslint/no-restricted-imports'] ?? null);
      expect(patterns, `${dir}: add it to eslint.config.js`).toContain('Service logic stays free of Koa and GraphQL');
      if (dir.startsWith('plugins/')) expect(service.rules?.['fence/plugin-boundary'], `${dir}: fenced off from other plugins`).toEqual([2]);
      for (const wiring of WIRING) {
        const cfg = await eslint.calculateConfigForFile(join(ROOT, dir, wiring));
        expect(JSON.stringify(cfg.rules?.['@typescript-eslint/no-restricted-imports'] ?? null), `${dir}/${wiring}`).not.toContain('Service logic stays free');
      }
    }
  });
});

describe('file size', () => {
  const production = [...tsFiles('core'), ...tsFiles('lib'), ...tsFiles('plugins'), ...tsFiles('config'), 'server.ts', 'builtin-plugins.ts'];

  it(`no production file is over ${MAX_LINES} lines unless allowlisted with a reason`, () => {
    const over = production
      .filter((f) => lineCount(f) > MAX_LINES && !OVER_MAX_LINES[f])
      .map((f) => `${f} (${lineCount(f)} lines)`);
    expect(over).toEqual([]);
  });

  it(`core/ stays the kernel: at most ${MAX_CORE_LINES} lines in all`, () => {
    const files = tsFiles('core');
    expect(files.length).toBeGreaterThan(20);
    expect(files.reduce((n, f) => n + lineCount(f), 0)).toBeLessThanOrEqual(MAX_CORE_LINES);
  });

  it('the allowlist holds no stale entry', () => {
    for (const f of Object.keys(OVER_MAX_LINES)) {
      expect(production, `${f} is gone: drop it from OVER_MAX_LINES`).toContain(f);
      expect(lineCount(f), `${f} is back under ${MAX_LINES} lines: drop it from OVER_MAX_LINES`).toBeGreaterThan(MAX_LINES);
    }
  });
});

/**
 * A citation no reader of the repository can follow: an unpublished document or an issue number
 * (the first test below lists what it catches and what it leaves alone). Narrow on purpose, so
 * ordinary words ("issuer", a token's issue time, `PluginSpec`) never match.
 */
const CITATION = /\bspec(?:ification)? document\b|\bthe spec\b|\bspec's\b|\bspec (?:order|fields?|defaults|message|table|service)\b|\(spec\b|\bissues? #?\d+|\bissues \d+|\(issue\b|\bissue "|(?<![\w/&#])#\d+\b/i;

/** The Markdown files under `dir` (recursive), relative to the root. */
function mdFiles(dir: string): string[] {
  const abs = join(ROOT, dir);
  if (!existsSync(abs)) return [];
  return readdirSync(abs, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? (e.name === 'node_modules' || e.name === 'dist' ? [] : mdFiles(join(dir, e.name))) : e.name.endsWith('.md') ? [join(dir, e.name)] : [],
  );
}

/** Source files of `dir` (recursive: .ts, .tsx, .js), relative to the root. */
function sourceFiles(dir: string): string[] {
  const abs = join(ROOT, dir);
  if (!existsSync(abs)) return [];
  if (statSync(abs).isFile()) return [dir];
  return readdirSync(abs, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? (e.name === 'node_modules' || e.name === 'dist' ? [] : sourceFiles(join(dir, e.name))) : /\.(tsx?|js)$/.test(e.name) ? [join(dir, e.name)] : [],
  );
}

/** The comments of a source file, each with its line: block comments and `//` comments. */
function comments(file: string): { line: number; text: string }[] {
  const src = read(file);
  const out: { line: number; text: string }[] = [];
  for (const m of src.matchAll(/\/\*[\s\S]*?\*\/|(?<![:'"`\\])\/\/.*$/gm)) {
    const line = src.slice(0, m.index).split('\n').length;
    m[0].split('\n').forEach((text, i) => out.push({ line: line + i, text }));
  }
  return out;
}

/** `file:line: text` for every line of `lines` that cites something unreadable. */
const citations = (file: string, lines: { line: number; text: string }[]) =>
  lines.filter(({ text }) => CITATION.test(text)).map(({ line, text }) => `${file}:${line}: ${text.trim()}`);

describe('docs and comments state the rule, never an issue number or an unpublished document', () => {
  it('the pattern catches citations and leaves ordinary words alone', () => {
    for (const bad of ['as spec document 1 says', 'the order the spec defines', 'the spec\'s fields', 'the spec fields', '(issue 24)', 'Issues 21 and 22', 'issue #22', 'see #21', '(issue "hardening")']) {
      expect(CITATION.test(bad), bad).toBe(true);
    }
    for (const fine of ['the token issuer', 'issued at', 'token issue', 'PluginSpec', 'a specific field', 'payloadcms/payload#13518', 'the specified order']) {
      expect(CITATION.test(fine), fine).toBe(false);
    }
  });

  it('no page under docs/, README.md or a history file cites one', () => {
    const pages = ['README.md', ...mdFiles('docs'), ...mdFiles('bench'), ...mdFiles('admin-console')];
    expect(pages.length).toBeGreaterThan(15);
    const found = pages.flatMap((f) => citations(f, read(f).split('\n').map((text, i) => ({ line: i + 1, text }))));
    expect(found).toEqual([]);
  });

  it('no code comment cites one', () => {
    const files = ['core', 'lib', 'plugins', 'config', 'scripts', 'bench', 'test', 'admin-console/src', 'docs/examples', 'index.ts', 'testing.ts', 'server.ts', 'builtin-plugins.ts', 'eslint.config.js'].flatMap(sourceFiles);
    expect(files.length).toBeGreaterThan(100);
    expect(files.flatMap((f) => citations(f, comments(f)))).toEqual([]);
  });
});
