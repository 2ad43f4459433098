/**
 * The sender's slots (plugins/webhooks/slots.ts), in memory: a claim never takes more of an
 * endpoint than its share unless the endpoint answers (then up to twice its share), never more
 * within the share than the free slots, never more in all than twice the concurrency; a hanging
 * endpoint or one not yet sent to holds its share only; the search covers what it may claim.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { AHEAD_SHARES, AHEAD_WINDOW_MS, Slots } from '../../plugins/webhooks/slots.ts';

const rows = (endpoint: string, n: number) => Array.from({ length: n }, (_, i) => ({ endpoint_id: endpoint, i }));
const count = (list: { endpoint_id: string }[], endpoint: string) => list.filter((r) => r.endpoint_id === endpoint).length;

describe('slots', () => {
  beforeEach(() => vi.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => vi.useRealTimers());

  it('claims an endpoint not yet sent to within its share and the free slots only', () => {
    const s = new Slots<string>({ concurrency: 3, endpointConcurrency: 2 });
    const chosen = s.choose([...rows('a', 5), ...rows('b', 5)], Date.now());
    expect(count(chosen, 'a')).toBe(2);
    expect(count(chosen, 'b')).toBe(1);
    expect([...s.backlog].sort()).toEqual(['a', 'b']);
  });

  it('claims ahead up to AHEAD_SHARES more shares for an endpoint that answers, and never more', () => {
    const s = new Slots<string>({ concurrency: 10, endpointConcurrency: 2 });
    // One attempt of `a` ended just now; two are under way, begun just now.
    s.begin('a', Date.now())();
    s.begin('a', Date.now());
    s.begin('a', Date.now());
    expect(s.ahead('a', Date.now())).toBe(2 * AHEAD_SHARES);
    const chosen = s.choose(rows('a', 10), Date.now());
    expect(chosen).toHaveLength(2 * AHEAD_SHARES);
    s.hold('a', chosen.map((r) => String(r.i)));
    expect(s.held('a')).toBe(2 + 2 * AHEAD_SHARES);
    expect(s.choose(rows('a', 10), Date.now())).toHaveLength(0);
    expect(s.freshRoom('a', Date.now())).toBe(0);
    // The ones waiting do not start while the share is under way.
    expect(s.launchable()).toEqual([]);
  });

  it('holds no more than the share of an endpoint whose attempt hangs, or that answered too long ago', () => {
    const s = new Slots<string>({ concurrency: 10, endpointConcurrency: 2 });
    s.begin('a', Date.now())();
    s.begin('a', Date.now());
    vi.advanceTimersByTime(AHEAD_WINDOW_MS + 1);
    // The attempt under way is older than the window: no claim ahead.
    expect(s.ahead('a', Date.now())).toBe(0);
    expect(s.choose(rows('a', 10), Date.now())).toHaveLength(1);
    const t = new Slots<string>({ concurrency: 10, endpointConcurrency: 2 });
    t.begin('b', Date.now())();
    vi.advanceTimersByTime(AHEAD_WINDOW_MS + 1);
    expect(t.ahead('b', Date.now())).toBe(0);
    expect(t.choose(rows('b', 10), Date.now())).toHaveLength(2);
    // The fresh claim: twice the share for an endpoint that does not answer (decision 0031).
    expect(t.freshRoom('b', Date.now())).toBe(4);
    // An attempt that ended by timing out (it took longer than the window) is no answer.
    const u = new Slots<string>({ concurrency: 10, endpointConcurrency: 2 });
    const end = u.begin('c', Date.now());
    vi.advanceTimersByTime(AHEAD_WINDOW_MS + 1);
    end();
    u.begin('c', Date.now());
    expect(u.ahead('c', Date.now())).toBe(0);
    expect(u.choose(rows('c', 10), Date.now())).toHaveLength(1);
  });

  it('never holds more than (1 + AHEAD_SHARES) times the concurrency claimed in all; deliveries claimed ahead take no other endpoint\'s slot', () => {
    const s = new Slots<string>({ concurrency: 4, endpointConcurrency: 2 });
    const now = Date.now();
    for (const k of ['a', 'b']) {
      s.begin(k, now)();
      s.begin(k, now);
      s.begin(k, now);
    }
    expect(s.free).toBe(0);
    expect(s.room).toBe((1 + AHEAD_SHARES) * 4 - 4);
    const chosen = s.choose([...rows('a', 12), ...rows('b', 12), ...rows('c', 5)], now);
    // Both answer, and may have AHEAD_SHARES shares more each; `c` would need a free slot, and none is.
    expect(count(chosen, 'a')).toBe(2 * AHEAD_SHARES);
    expect(count(chosen, 'b')).toBe(2 * AHEAD_SHARES);
    expect(count(chosen, 'c')).toBe(0);
    s.hold('a', chosen.filter((r) => r.endpoint_id === 'a').map((r) => `a${r.i}`));
    s.hold('b', chosen.filter((r) => r.endpoint_id === 'b').map((r) => `b${r.i}`));
    expect(s.room).toBe(0);
    expect(s.choose(rows('a', 5), now)).toEqual([]);
    // `a` ends one attempt: its first waiting delivery takes that slot, and no other's.
    const t = new Slots<string>({ concurrency: 4, endpointConcurrency: 2 });
    const endA = t.begin('a', now);
    t.begin('a', now);
    t.hold('a', ['a1', 'a2']);
    // Claimed ahead of `a`'s share, they leave the two other slots free for other endpoints.
    expect(t.free).toBe(2);
    expect(count(t.choose(rows('c', 5), now), 'c')).toBe(2);
    endA();
    expect(t.launchable().map((x) => x.item)).toEqual(['a1']);
  });

  it('searches every endpoint below its cap while a slot is free, then only the answering ones with a backlog', () => {
    const s = new Slots<string>({ concurrency: 2, endpointConcurrency: 1 });
    expect(s.scope(Date.now())).toEqual({ free: true, full: [] });
    s.begin('a', Date.now())();
    s.begin('a', Date.now());
    s.begin('b', Date.now());
    // Both slots busy; `a` answers but has no known backlog: no search.
    expect(s.scope(Date.now())).toBeNull();
    s.backlog.add('a');
    s.backlog.add('b');
    expect(s.scope(Date.now())).toEqual({ free: false, fast: ['a'] });
    // A search that saw every due delivery of `a` and found none: no backlog left.
    s.searchedAll({ free: false, fast: ['a'] }, []);
    expect([...s.backlog]).toEqual(['b']);
  });

  it('starts waiting deliveries as slots come free, within the share and the concurrency', () => {
    const s = new Slots<string>({ concurrency: 2, endpointConcurrency: 1 });
    s.hold('a', ['a1', 'a2']);
    s.hold('b', ['b1']);
    expect(s.launchable().map((x) => x.item)).toEqual(['a1', 'b1']);
    const endA = s.begin('a', Date.now());
    s.begin('b', Date.now());
    expect(s.launchable()).toEqual([]);
    endA();
    expect(s.launchable().map((x) => x.item)).toEqual(['a2']);
    expect(s.readyCount).toBe(0);
  });
});
