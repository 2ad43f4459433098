import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * No import cycles among the production files: core/, lib/, plugins/, config/, scripts/, server.ts, builtin-plugins.ts,
 * index.ts, testing.ts, and the console's own app in admin-console/src. Every edge counts: static
 * imports, `import type`, re-exports (`export … from`), dynamic `import()` and `declare module`
 * augmentations, read with `ts.preProcessFile` (the compiler's own scanner, so a string in a
 * comment is no edge). A
 * type-only cycle counts too: it vanishes at run time, but a reader still cannot understand one
 * file without the other, and it is the first step to a value cycle (whose module sees the other
 * half as `undefined` at load time). Types two files share live in a file of their own.
 * Only relative specifiers make edges; packages cannot import back into the tree.
 */
const ROOT = resolve(import.meta.dirname, '../..');

const ROOTS = ['core', 'lib', 'plugins', 'config', 'scripts', 'server.ts', 'builtin-plugins.ts', 'index.ts', 'testing.ts', 'admin-console/src'];
const SOURCE = /\.tsx?$/;

/**
 * Cycles still tolerated, each file list (sorted, ` ↔ `-joined, exactly as the test prints it) →
 * why. Keep it short; a stale entry (the cycle gone or grown) fails the test.
 */
const KNOWN_CYCLES: Record<string, string> = {};

/** Every .ts/.tsx file under `dir` (recursive), as paths relative to the repository root. */
function sourceFiles(dir: string): string[] {
  const abs = join(ROOT, dir);
  if (!existsSync(abs)) return [];
  if (statSync(abs).isFile()) return SOURCE.test(dir) && !dir.endsWith('.d.ts') ? [dir] : [];
  return readdirSync(abs, { withFileTypes: true }).flatMap((e) =>
    sourceFiles(join(dir, e.name)),
  );
}

/** Import graph: file → the files it names (relative specifiers resolved the way TypeScript's bundler/NodeNext resolution does). */
type Graph = Map<string, string[]>;

/** The repository file a relative `spec` written in `from` names, or undefined (a package, a non-TS asset). */
function resolveSpec(from: string, spec: string, exists: (file: string) => boolean): string | undefined {
  if (!spec.startsWith('.')) return undefined;
  const base = join(dirname(from), spec.replace(/\?.*$/, ''));
  const stem = base.replace(/\.(m|c)?js$/, '').replace(/\.jsx$/, '');
  const candidates = [base, `${stem}.ts`, `${stem}.tsx`, join(base, 'index.ts'), join(base, 'index.tsx')];
  return candidates.find((c) => SOURCE.test(c) && exists(c));
}

/** The import graph of `files`, read by `read`; edges to files outside the set are dropped. */
function importGraph(files: string[], read: (file: string) => string): Graph {
  const known = new Set(files);
  const graph: Graph = new Map();
  for (const file of files) {
    const info = ts.preProcessFile(read(file), true, true);
    const targets = info.importedFiles
      .map((ref) => resolveSpec(file, ref.fileName, (f) => known.has(f)))
      .filter((t): t is string => t !== undefined);
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

/**
 * The cycles of `graph`: its strongly connected components with more than one file, or one file
 * importing itself (Tarjan's algorithm, iterative so a deep chain cannot overflow the stack).
 * Each component is sorted; the list is sorted by its first file.
 */
function cycles(graph: Graph): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const found: string[][] = [];
  for (const start of graph.keys()) {
    if (index.has(start)) continue;
    const work: Array<{ node: string; edge: number }> = [{ node: start, edge: 0 }];
    index.set(start, next);
    low.set(start, next++);
    stack.push(start);
    onStack.add(start);
    while (work.length > 0) {
      const frame = work.at(-1)!;
      const edges = graph.get(frame.node) ?? [];
      if (frame.edge < edges.length) {
        const to = edges[frame.edge++]!;
        if (!index.has(to)) {
          index.set(to, next);
          low.set(to, next++);
          stack.push(to);
          onStack.add(to);
          work.push({ node: to, edge: 0 });
        } else if (onStack.has(to)) {
          low.set(frame.node, Math.min(low.get(frame.node)!, index.get(to)!));
        }
        continue;
      }
      work.pop();
      const parent = work.at(-1);
      if (parent) low.set(parent.node, Math.min(low.get(parent.node)!, low.get(frame.node)!));
      if (low.get(frame.node) !== index.get(frame.node)) continue;
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== frame.node);
      const selfLoop = component.length === 1 && edges.includes(frame.node);
      if (component.length > 1 || selfLoop) found.push(component.sort());
    }
  }
  return found.sort((a, b) => a[0]!.localeCompare(b[0]!));
}

describe('import cycle detector', () => {
  const sources: Record<string, string> = {
    'a/one.ts': "import { two } from './two.js';\nexport const one = two;",
    'a/two.ts': "import type { Three } from '../b/index.js';\nexport const two = 2;",
    'b/index.ts': "export * from './three';",
    'b/three.ts': "export type Three = 3;\nexport const load = () => import('../a/one.js');",
    'c/alone.ts': "// import { one } from '../a/one.js';\nimport { z } from 'zod';\nexport const alone = z;",
    'c/self.ts': "export { self } from './self.ts';",
    'd/augment.ts': "declare module '../a/two.ts' {\n  interface Extra { d: true }\n}\nexport {};",
  };
  const graph = importGraph(Object.keys(sources), (f) => sources[f]!);

  it('reads type imports, re-exports, dynamic imports, augmentations and index files, not comments or packages', () => {
    expect(graph.get('a/one.ts')).toEqual(['a/two.ts']);
    expect(graph.get('a/two.ts')).toEqual(['b/index.ts']);
    expect(graph.get('b/index.ts')).toEqual(['b/three.ts']);
    expect(graph.get('b/three.ts')).toEqual(['a/one.ts']);
    expect(graph.get('c/alone.ts')).toEqual([]);
    expect(graph.get('d/augment.ts')).toEqual(['a/two.ts']);
  });

  it('finds the planted cycle through all four kinds of edge, and a self-import', () => {
    expect(cycles(graph)).toEqual([['a/one.ts', 'a/two.ts', 'b/index.ts', 'b/three.ts'], ['c/self.ts']]);
  });

  it('finds nothing once the cycle is cut', () => {
    const cut = new Map(graph);
    cut.set('b/three.ts', []);
    cut.set('c/self.ts', []);
    expect(cycles(cut)).toEqual([]);
  });
});

describe('production import graph', () => {
  const files = ROOTS.flatMap(sourceFiles);
  const graph = importGraph(files, (f) => readFileSync(join(ROOT, f), 'utf8'));

  it('reads the whole tree', () => {
    expect(files).toContain('core/plugin.ts');
    expect(files).toContain('admin-console/src/main.tsx');
    expect(graph.get('server.ts')!.length).toBeGreaterThan(0);
  });

  const found = cycles(graph).map((c) => c.join(' ↔ '));

  it('has no import cycles', () => {
    const fresh = found.filter((c) => !KNOWN_CYCLES[c]);
    expect(fresh, `import cycles (move the shared types into a file of their own):\n${fresh.join('\n')}`).toEqual([]);
  });

  it('has no stale KNOWN_CYCLES entry', () => {
    expect(Object.keys(KNOWN_CYCLES).filter((c) => !found.includes(c))).toEqual([]);
  });
});
