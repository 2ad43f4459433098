/** `escapeHtml` (lib/html.ts), the one escape of the HTML the server writes: pages and e-mails. */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { escapeHtml } from '../../lib/html.ts';

describe('escapeHtml', () => {
  it('writes the five characters that end text or a quoted attribute as entities, and keeps the rest', () => {
    expect(escapeHtml(`<a href="x" title='y'>Tom & Jerry</a>`)).toBe('&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;Tom &amp; Jerry&lt;/a&gt;');
    expect(escapeHtml('café — 東京')).toBe('café — 東京');
    expect(escapeHtml(42)).toBe('42');
    expect(escapeHtml(null)).toBe('null');
  });

  it('leaves no raw markup character, and decoding the entities gives back the text', () => {
    const decode = (s: string) => s.replace(/&(amp|lt|gt|quot|#39);/g, (_, e: string) => ({ amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'" })[e]!);
    fc.assert(fc.property(fc.string(), (s) => {
      const out = escapeHtml(s);
      expect(out).not.toMatch(/[<>"']/);
      expect(out.replace(/&(amp|lt|gt|quot|#39);/g, '')).not.toContain('&');
      expect(decode(out)).toBe(s);
    }), { numRuns: 500 });
  });
});
