/** The pure value functions behind `changes` and `snapshot`: equality by value and redaction. */
import { Types } from 'mongoose';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_DENY_FIELDS, DEFAULT_IGNORED_FIELDS, Redactor, diffDocs, sameValue } from '../../plugins/audit/diff.ts';

describe('sameValue', () => {
  it('compares nested objects regardless of key order, arrays in order', () => {
    expect(sameValue({ a: 1, b: { c: [1, { d: 2 }] } }, { b: { c: [1, { d: 2 }] }, a: 1 })).toBe(true);
    expect(sameValue([1, 2], [2, 1])).toBe(false);
    expect(sameValue({ a: [1, 2] }, { a: [1, 2, 3] })).toBe(false);
    expect(sameValue({ a: { b: 1 } }, { a: { b: '1' } })).toBe(false);
  });

  it('compares dates by instant, ObjectIds by hex (also against a string), buffers by bytes', () => {
    expect(sameValue(new Date('2026-01-01T00:00:00Z'), new Date('2026-01-01T00:00:00.000Z'))).toBe(true);
    expect(sameValue(new Date(1), new Date(2))).toBe(false);
    expect(sameValue(new Date(0), 0)).toBe(false);
    const id = new Types.ObjectId();
    expect(sameValue(id, new Types.ObjectId(String(id)))).toBe(true);
    expect(sameValue(id, String(id))).toBe(true);
    expect(sameValue(id, new Types.ObjectId())).toBe(false);
    expect(sameValue(Buffer.from('ab'), Buffer.from('ab'))).toBe(true);
    expect(sameValue(Buffer.from('ab'), Buffer.from('ac'))).toBe(false);
  });

  it('treats null and a missing value alike', () => {
    expect(sameValue(null, undefined)).toBe(true);
    expect(sameValue({ a: 1, b: null }, { a: 1 })).toBe(true);
    expect(sameValue(null, 0)).toBe(false);
    expect(sameValue(null, '')).toBe(false);
  });
});

describe('diffDocs', () => {
  const ignored = new Set(DEFAULT_IGNORED_FIELDS);
  it('lists changed top-level fields as {old, new}, ignoring server-maintained ones', () => {
    expect(
      diffDocs(
        { _id: 1, a: 1, b: { x: 1 }, gone: 'g', updated_at: new Date(1), version: 1 },
        { _id: 1, a: 1, b: { x: 2 }, added: [1], updated_at: new Date(2), version: 2 },
        ignored,
      ),
    ).toEqual({ b: { old: { x: 1 }, new: { x: 2 } }, gone: { old: 'g', new: null }, added: { old: null, new: [1] } });
    expect(diffDocs({ updated_at: new Date(1), updated_by: 'u1', version: 1 }, { updated_at: new Date(2), updated_by: 'u2', version: 2 }, ignored)).toEqual({});
  });
});

describe('Redactor', () => {
  const r = new Redactor(DEFAULT_DENY_FIELDS);
  it('drops deny-listed names at any depth, whatever their case or separators', () => {
    expect(
      r.redact({ name: 'n', Password: 'x', nested: { apiKey: 'k', 'API-KEY': 'k', keep: 1, list: [{ token: 't', ok: true }] }, key_hash: 'h' }),
    ).toEqual({ name: 'n', nested: { keep: 1, list: [{ ok: true }] } });
  });

  it('drops secret paths, through arrays too, and copies instead of mutating', () => {
    const doc = { pin: 1, profile: { ssn: 2, city: 'c' }, items: [{ code: 3, n: 1 }, { code: 4, n: 2 }] };
    expect(r.redact(doc, ['pin', 'profile.ssn', 'items.code', 'missing.path'])).toEqual({ profile: { city: 'c' }, items: [{ n: 1 }, { n: 2 }] });
    expect(doc.profile.ssn).toBe(2);
    expect(doc.items[0]!.code).toBe(3);
  });

  it('keeps dates and ObjectIds as they are and reads mongoose documents as plain data', () => {
    const id = new Types.ObjectId();
    const when = new Date();
    const out = r.redact({ id, when, map: new Map([['secret', 1], ['a', 2]]) });
    expect(out.id).toBe(id);
    expect(out.when).toBe(when);
    expect(out.map).toEqual({ a: 2 });
  });
});

describe('Redactor.changes', () => {
  const redactor = new Redactor(DEFAULT_DENY_FIELDS);
  const ignored = new Set(DEFAULT_IGNORED_FIELDS);
  // Names include deny-listed ones (any spelling) and ignored ones; values nest objects and arrays.
  const name = fc.constantFrom('a', 'b', 'note', 'password', 'API-Key', 'apiKey', 'version', 'updated_at', 'tags');
  const leaf = fc.oneof(fc.integer({ min: 0, max: 3 }), fc.constantFrom('x', 'y', null), fc.constant(new Date(5)));
  const value = fc.letrec((tie) => ({
    v: fc.oneof({ depthSize: 'small' }, leaf, fc.array(tie('v'), { maxLength: 3 }), fc.dictionary(name, tie('v'), { maxKeys: 3 })),
  })).v;
  const doc = fc.dictionary(name, value, { maxKeys: 6 });

  it('is diffDocs of the two redacted documents, whatever the documents', () => {
    fc.assert(fc.property(doc, doc, (before, after) => {
      expect(redactor.changes(before, after, ignored)).toEqual(diffDocs(redactor.redact(before), redactor.redact(after), ignored));
    }), { numRuns: 500 });
  });

  it('counts no change inside a deny-listed name, and shows changed values redacted', () => {
    const changes = redactor.changes({ a: { password: 'p1', x: 1 }, b: { token: 't1' } }, { a: { password: 'p2', x: 2 }, b: { token: 't2' } }, ignored);
    expect(changes).toEqual({ a: { old: { x: 1 }, new: { x: 2 } } });
  });
});
