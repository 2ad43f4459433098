import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { buildTestApp } from '../helpers/app.ts';
import { ROOT } from './helpers.ts';

const run = promisify(execFile);

/** A marker on the line before a ```ts fence: the block is an excerpt, not meant to compile alone. */
export const PARTIAL = '<!-- snippet: partial -->';

interface Snippet { file: string; line: number; code: string }

/** The ```ts blocks of a Markdown text not marked partial, with the line of their first code line. */
export function tsSnippets(file: string, text: string): Snippet[] {
  const lines = text.split('\n');
  const out: Snippet[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (!/^\s*```ts\s*$/.test(lines[i]!)) continue;
    const end = lines.findIndex((l, j) => j > i && /^\s*```\s*$/.test(l));
    const partial = lines[i - 1]?.trim() === PARTIAL;
    const indent = /^\s*/.exec(lines[i]!)![0].length;
    if (!partial) out.push({ file, line: i + 2, code: lines.slice(i + 1, end).map((l) => l.slice(indent)).join('\n') });
    i = end;
  }
  return out;
}

describe('TypeScript snippets of the docs', () => {
  it('type-check as written (imports from plugin-api-server), unless marked partial', async () => {
    const docs = ['README.md', ...(await readdir(join(ROOT, 'docs'))).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
    const snippets = (await Promise.all(docs.map(async (f) => tsSnippets(f, await readFile(join(ROOT, f), 'utf8'))))).flat();
    expect(snippets.length).toBeGreaterThanOrEqual(5);
    // Inside the repository, so 'plugin-api-server' resolves to this package through its exports.
    const dir = await mkdtemp(join(ROOT, '.doc-snippets-'));
    try {
      const names = snippets.map((s, i) => `s${i}.ts`);
      await Promise.all(snippets.map((s, i) => writeFile(join(dir, names[i]!), `${s.code}\nexport {};\n`)));
      await writeFile(join(dir, 'tsconfig.json'), JSON.stringify({ extends: '../tsconfig.json', include: ['*.ts'] }));
      const out = await run(join(ROOT, 'node_modules/.bin/tsc'), ['--noEmit', '-p', dir], { cwd: ROOT }).then(
        () => '',
        (err: { stdout?: string }) => err.stdout ?? String(err),
      );
      // Errors pointed back at the Markdown file and line.
      const errors = out.split('\n').filter(Boolean).map((l) => {
        const m = /s(\d+)\.ts\((\d+),\d+\): (.*)/.exec(l);
        if (!m) return l;
        const s = snippets[Number(m[1])]!;
        return `${s.file}:${s.line + Number(m[2]) - 1}: ${m[3]}`;
      });
      expect(errors).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 300_000);
});

/** One `curl` of a shell walk-through: what it sends, and the comment after it (`# → {"id":"<ANN>"}`). */
interface Step { method: string; path: string; headers: Record<string, string>; body?: string; comment: string }

/** Words of a shell command line: single and double quotes, `$VAR` expanded inside double quotes and bare words. */
function words(line: string, vars: Record<string, string>): string[] {
  const out: string[] = [];
  const re = /'([^']*)'|"((?:[^"\\]|\\.)*)"|(\S+)/g;
  for (const m of line.matchAll(re)) out.push(m[1] ?? (m[2] ?? m[3]!).replace(/\$(\w+)/g, (_, v: string) => vars[v] ?? ''));
  return out;
}

/** The `curl` steps of the README's walk-through, with its shell variables (`ADMIN=...`, `KEY=...`) expanded. */
function walkThrough(readme: string): Step[] {
  const section = readme.slice(readme.indexOf('## Walk-through'));
  const block = /```sh\n([\s\S]*?)```/.exec(section)![1]!;
  const commands: { text: string; comment: string }[] = [];
  let pending = '';
  for (const raw of block.split('\n')) {
    const [code, ...rest] = raw.split(/\s#\s|^\s*#\s/);
    const comment = rest.join(' # ');
    if (!code!.trim()) {
      if (comment && commands.length) commands.at(-1)!.comment += ` ${comment}`;
      continue;
    }
    pending += ` ${code!.trim().replace(/\\$/, '')}`;
    if (code!.trim().endsWith('\\')) continue;
    commands.push({ text: pending.trim(), comment });
    pending = '';
  }
  const vars: Record<string, string> = {};
  const steps: Step[] = [];
  for (const { text, comment } of commands) {
    const assign = /^(\w+)='([^']*)'$/.exec(text);
    if (assign) vars[assign[1]!] = assign[2]!;
    if (!text.startsWith('curl ')) continue;
    const w = words(text, vars);
    const step: Step = { method: 'GET', path: '', headers: {}, comment };
    for (let i = 1; i < w.length; i++) {
      if (w[i] === '-X') step.method = w[++i]!;
      else if (w[i] === '-H') {
        const [name, ...value] = w[++i]!.split(':');
        step.headers[name!] = value.join(':').trim();
      } else if (w[i] === '-d') step.body = w[++i];
      else if (w[i]!.startsWith('localhost:3000')) step.path = w[i]!.slice('localhost:3000'.length);
    }
    // curl sends -d as a POST unless -X says otherwise.
    if (step.body !== undefined && !w.includes('-X')) step.method = 'POST';
    steps.push(step);
  }
  return steps;
}

describe('the README walk-through', () => {
  it('runs as written: a tenant, its administrator Ann (whose key the rest uses) and a plain user Bob', async () => {
    const steps = walkThrough(await readFile(join(ROOT, 'README.md'), 'utf8'));
    expect(steps.length).toBeGreaterThanOrEqual(10);
    const t = await buildTestApp({ plugins: [resourcesPlugin], config: { ADMIN_API_KEY: 'change-me-bootstrap-key-123' } });
    try {
      // Placeholders (`<TENANT>`, `<ANN>`, `<ANN_KEY>`, `<ID>`) are bound by the comment of the step that answers them.
      const bound: Record<string, string> = {};
      const fill = (s: string) => s.replace(/<([A-Z_]+)>/g, (all, name: string) => bound[name] ?? all);
      const answers: { step: Step; body: any }[] = [];
      for (const step of steps) {
        const headers = Object.fromEntries(Object.entries(step.headers).map(([k, v]) => [k, fill(v)]));
        const res = await t.http(step.method, fill(step.path), { key: null, headers, ...(step.body ? { body: fill(step.body) } : {}) });
        expect(res.status, `${step.method} ${step.path}: ${JSON.stringify(res.body)}`).toBeLessThan(300);
        for (const [, field, name] of step.comment.matchAll(/"(\w+)":"<([A-Z_]+)>"/g)) bound[name!] = res.body[field!];
        answers.push({ step, body: res.body });
      }
      expect(Object.keys(bound).sort()).toEqual(['ANN', 'ANN_KEY', 'BOB', 'ID', 'TENANT']);
      const me = answers.find((a) => a.step.path === '/auth/me')!.body;
      expect(me).toMatchObject({ email: 'ann@acme.test', roles: ['admin'] });
      const users = answers.find((a) => a.step.path === '/admin/users' && a.step.method === 'GET')!.body;
      expect(JSON.stringify(users)).toContain('bob@acme.test');
    } finally {
      await t.close();
    }
  }, 120_000);
});

describe('webhooks in the docs', () => {
  it('inbound and outbound link to each other, and the README plugins line names both', async () => {
    const read = (f: string) => readFile(join(ROOT, f), 'utf8');
    const [readme, inbound, events] = await Promise.all([read('README.md'), read('docs/webhooks.md'), read('docs/events.md')]);
    expect(events).toMatch(/^## Outbound webhooks$/m);
    expect(inbound.split('\n## ')[0]).toContain('](events.md#outbound-webhooks)');
    expect(events.slice(events.indexOf('## Outbound webhooks')).split('\n### ')[0]).toContain('](webhooks.md)');
    const pluginsLine = readme.slice(readme.indexOf('- **Plugins**'), readme.indexOf('`jobs` (background jobs'));
    expect(pluginsLine).toMatch(/outbound/i);
    expect(pluginsLine).toMatch(/inbound/i);
    expect(pluginsLine).toContain('(docs/events.md#outbound-webhooks)');
    expect(pluginsLine).toContain('(docs/webhooks.md)');
  });
});
