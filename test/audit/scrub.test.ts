/** `scrubSubject`: personal values replaced in stored entries, every other value written back as it was. */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Binary, Decimal128, Long, ObjectId } from 'mongodb';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { auditCollection, seedEntries } from './helpers.ts';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [auditPlugin] });
});
afterAll(() => t?.close());

it('replaces the subject’s values and leaves Decimal128, Binary, Long, ObjectId and Date values byte-identical', async () => {
  const subject = new ObjectId();
  const item = new ObjectId();
  const ref = new ObjectId();
  const at = new Date('2026-01-02T03:04:05.678Z');
  const bytes = Buffer.from([0, 1, 2, 0xfe, 0xff]);
  const [deleted, updated, unrelated] = await seedEntries(t, [
    {
      resource: 'invoices', item_id: item, operation: 'delete',
      snapshot: {
        owner_email: 'Subject@Example.com', note: 'kept', amount: Decimal128.fromString('1234.5600'), blob: new Binary(bytes),
        big: Long.fromString('9007199254740993'), ref, at, nested: { contact: 'subject@example.com', price: Decimal128.fromString('0.10') }, tags: ['subject@example.com', 'x'],
      },
    },
    {
      resource: 'invoices', item_id: item, operation: 'update',
      changes: { amount: { old: Decimal128.fromString('1.00'), new: Decimal128.fromString('2.00') }, owner_email: { old: 'subject@example.com', new: null }, blob: { old: null, new: new Binary(bytes) } },
    },
    // Nothing personal: not written again.
    { resource: 'invoices', item_id: item, operation: 'update', changes: { amount: { old: Decimal128.fromString('3.00'), new: Decimal128.fromString('4.00') } } },
  ]);
  const before = await auditCollection(t).findOne({ _id: new ObjectId(unrelated) });

  const res = await t.app.services.get('audit').scrubSubject({
    subject_user_id: subject, documents: [{ resource: 'invoices', item_id: item, fields: [] }], values: ['subject@example.com'], replacement: 'anonymous',
  });

  const raw = async (id: string) => (await auditCollection(t).findOne({ _id: new ObjectId(id) }, { promoteLongs: false }))!;
  const d = await raw(deleted!);
  expect(d.snapshot.owner_email).toBe('anonymous');
  expect(d.snapshot.nested.contact).toBe('anonymous');
  expect(d.snapshot.tags).toEqual(['anonymous', 'x']);
  expect(d.snapshot.note).toBe('kept');
  expect(d.snapshot.amount).toBeInstanceOf(Decimal128);
  expect(d.snapshot.amount.toString()).toBe('1234.5600');
  expect(d.snapshot.nested.price).toBeInstanceOf(Decimal128);
  expect(d.snapshot.nested.price.toString()).toBe('0.10');
  expect(d.snapshot.blob).toBeInstanceOf(Binary);
  expect(Buffer.from(d.snapshot.blob.buffer).equals(bytes)).toBe(true);
  expect(d.snapshot.big).toBeInstanceOf(Long);
  expect(d.snapshot.big.toString()).toBe('9007199254740993');
  expect(d.snapshot.ref).toBeInstanceOf(ObjectId);
  expect(String(d.snapshot.ref)).toBe(String(ref));
  expect(d.snapshot.at).toEqual(at);

  const u = await raw(updated!);
  expect(u.changes.owner_email).toEqual({ old: 'anonymous', new: null });
  expect(u.changes.amount.old).toBeInstanceOf(Decimal128);
  expect([u.changes.amount.old.toString(), u.changes.amount.new.toString()]).toEqual(['1.00', '2.00']);
  expect(u.changes.blob.new).toBeInstanceOf(Binary);
  expect(Buffer.from(u.changes.blob.new.buffer).equals(bytes)).toBe(true);

  expect(await auditCollection(t).findOne({ _id: new ObjectId(unrelated) })).toEqual(before);
  expect(res.scrubbed).toBe(2);
  // Idempotent: a second pass finds nothing left to change.
  expect((await t.app.services.get('audit').scrubSubject({
    subject_user_id: subject, documents: [{ resource: 'invoices', item_id: item, fields: [] }], values: ['subject@example.com'], replacement: 'anonymous',
  })).scrubbed).toBe(0);
});
