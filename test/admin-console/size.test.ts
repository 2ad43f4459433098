/**
 * The console's first load: the entry script of admin-console/dist (built by the test set-up) is at
 * most 60 KB gzip, and the screens opened later are not in it: the charts (uPlot) load with the
 * overview only, a document's History panel when a document that keeps versions is first opened.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';

const dist = resolve(import.meta.dirname, '../../admin-console/dist');
const read = (f: string) => readFileSync(resolve(dist, 'assets', f), 'utf8');
const firstLoad = () => {
  const html = readFileSync(resolve(dist, 'index.html'), 'utf8');
  return [...html.matchAll(/(?:src|href)="\/admin-console\/assets\/([^"]+\.js)"/g)].map((m) => m[1]!);
};
/** The one chunk named `<name>-<hash>.js`. */
const chunk = (name: string) => {
  const found = readdirSync(resolve(dist, 'assets')).filter((f) => f.startsWith(`${name}-`) && f.endsWith('.js'));
  expect(found, `one ${name} chunk`).toHaveLength(1);
  return found[0]!;
};

/** Code found in each lazily loaded part only: uPlot's option name, and texts of the History panel. */
const LAZY = [
  { chunk: 'charts', markers: ['spanGaps'] },
  { chunk: 'history', markers: ['Show older versions', 'Restore the document from deletion first', 'restore-dialog'] },
];

describe('console bundle', () => {
  it('loads at most 60 KB of JavaScript (gzip) first', () => {
    const first = firstLoad();
    expect(first.length).toBeGreaterThan(0);
    const gz = first.reduce((n, f) => n + gzipSync(readFileSync(resolve(dist, 'assets', f)), { level: 9 }).length, 0);
    expect(gz).toBeLessThanOrEqual(60 * 1024);
  });

  it.each(LAZY)('keeps $chunk out of the first load, in a chunk of its own', ({ chunk: name, markers }) => {
    for (const f of firstLoad()) for (const m of markers) expect(read(f), `${m} in ${f}`).not.toContain(m);
    const own = read(chunk(name));
    for (const m of markers) expect(own).toContain(m);
  });
});
