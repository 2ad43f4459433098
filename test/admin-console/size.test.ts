/**
 * The console's first load: the entry script of admin-console/dist (built by the test set-up) is at
 * most 60 KB gzip, and the charts (uPlot) are not in it: they load with the overview only.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';

const dist = resolve(import.meta.dirname, '../../admin-console/dist');

describe('console bundle', () => {
  it('loads at most 60 KB of JavaScript (gzip) first, without uPlot', () => {
    const html = readFileSync(resolve(dist, 'index.html'), 'utf8');
    const first = [...html.matchAll(/(?:src|href)="\/admin-console\/assets\/([^"]+\.js)"/g)].map((m) => m[1]!);
    expect(first.length).toBeGreaterThan(0);
    const gz = first.reduce((n, f) => n + gzipSync(readFileSync(resolve(dist, 'assets', f)), { level: 9 }).length, 0);
    expect(gz).toBeLessThanOrEqual(60 * 1024);
    for (const f of first) expect(readFileSync(resolve(dist, 'assets', f), 'utf8')).not.toContain('spanGaps');
    // uPlot is in a chunk of its own.
    const charts = readdirSync(resolve(dist, 'assets')).filter((f) => f.startsWith('charts-') && f.endsWith('.js'));
    expect(charts).toHaveLength(1);
    expect(readFileSync(resolve(dist, 'assets', charts[0]!), 'utf8')).toContain('spanGaps');
  });
});
