/** `RecentMap`: the bounded map of the keys set most recently (what the relay and the versions sink remember). */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RecentMap } from '../../lib/recent.ts';

describe('RecentMap', () => {
  it('holds the newest half of its capacity at least, and never more than its capacity', () => {
    fc.assert(fc.property(fc.integer({ min: 2, max: 50 }), fc.array(fc.integer({ min: 0, max: 80 }), { maxLength: 400 }), (capacity, keys) => {
      const m = new RecentMap<number, number>(capacity);
      keys.forEach((k, i) => m.set(k, i));
      // The newest floor(capacity / 2) distinct keys are there, with their last value.
      const newest: number[] = [];
      for (let i = keys.length - 1; i >= 0 && newest.length < Math.floor(capacity / 2); i--) if (!newest.includes(keys[i]!)) newest.push(keys[i]!);
      for (const k of newest) {
        expect(m.has(k)).toBe(true);
        expect(m.get(k)).toBe(keys.lastIndexOf(k));
      }
      const held = [...new Set(keys)].filter((k) => m.has(k));
      expect(held.length).toBeLessThanOrEqual(capacity);
      // A key held has its newest value, never an older one.
      for (const k of held) expect(m.get(k)).toBe(keys.lastIndexOf(k));
    }), { numRuns: 300 });
  });

  it('forgets the oldest keys once they are more than its capacity behind', () => {
    const m = new RecentMap<string, boolean>(10);
    for (let i = 0; i < 30; i++) m.set(`k${i}`, true);
    expect(m.has('k0')).toBe(false);
    expect(m.has('k19')).toBe(false);
    expect(m.has('k25')).toBe(true);
    expect(m.get('k29')).toBe(true);
    expect(m.get('k0')).toBeUndefined();
  });
});
