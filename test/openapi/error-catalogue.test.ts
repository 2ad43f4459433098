import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERROR_CATALOGUE, ErrorCode } from '../../core/errors.ts';

/** `| 404 | NOT_FOUND | ... |` rows of the table in docs/errors.md: code → status. */
const documented = (): Map<string, number> => {
  const text = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
  const rows = [...text.matchAll(/^\| (\d{3}) \| ([A-Z_]+) \|/gm)];
  return new Map(rows.map((m) => [m[2]!, Number(m[1])]));
};

describe('the error catalogue (core/errors.ts)', () => {
  it('holds every core code, each example carrying its own code', () => {
    for (const code of Object.values(ErrorCode)) expect(ERROR_CATALOGUE, code).toHaveProperty(code);
    for (const [code, doc] of Object.entries(ERROR_CATALOGUE)) {
      expect(doc.example.code).toBe(code);
      expect(doc.description.length).toBeGreaterThan(10);
    }
  });

  it('docs/errors.md lists every code of the catalogue, with the same status, and no other', () => {
    const docs = documented();
    const catalogue = new Map(Object.entries(ERROR_CATALOGUE).map(([code, d]) => [code, d.example.status]));
    expect(Object.fromEntries(docs)).toEqual(Object.fromEntries(catalogue));
  });
});
