import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
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
