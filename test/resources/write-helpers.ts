/**
 * Small helpers shared by the write-path suites (`write-*.test.ts`): raw collection access for
 * set-up and for checks behind the API's back, and "nothing was written" assertions.
 */
import { expect } from 'vitest';
import { Types } from 'mongoose';
import type { CommandStartedEvent } from 'mongodb';
import type { TestApp } from '../helpers/app.ts';

export const col = (t: TestApp, name: string) => t.app.db.conn.collection(name);
export const oid = (id: string) => new Types.ObjectId(id);
export const ifMatch = (etag: string) => ({ 'If-Match': etag });

/** Every document of a collection, in `_id` order, exactly as stored. */
export const dump = (t: TestApp, name: string) => col(t, name).find({}).sort({ _id: 1 }).toArray();

/** Runs `fn` and asserts that the listed collections are byte-for-byte what they were before. */
export async function expectNoWrite<T>(t: TestApp, collections: string[], fn: () => Promise<T>): Promise<T> {
  // Earlier writes' events leave their documents' outboxes when the relay runs: settle that first.
  const events = t.app.services.get('events');
  await events.flush();
  const before = await Promise.all(collections.map((c) => dump(t, c)));
  const out = await fn();
  await events.flush();
  const after = await Promise.all(collections.map((c) => dump(t, c)));
  for (const [i, c] of collections.entries()) expect(after[i], `collection ${c} changed`).toEqual(before[i]);
  return out;
}

/** The stored document (raw, private fields included) or null. */
export const raw = (t: TestApp, name: string, id: string) => col(t, name).findOne({ _id: oid(id) });

/** Error rows of a 207/409/422 bulk answer as `index:code` strings, for compact assertions. */
export const rowCodes = (errors: { index: number; error: { code: string } }[]) => errors.map((e) => `${e.index}:${e.error.code}`);

/**
 * Counts the database commands requests send, by name, collection and the `_id` of their filter.
 * `watch(t)` after the app is built, `unwatch()` before it closes; `of(collection, id, fn)` runs `fn`
 * (after the relay's pending batch is stored) and returns what it sent for that document: not the
 * sweep's reads of outbox windows nor the relay's clear (a multi-document `update`).
 */
export function commandCounter() {
  const commands: { name: string; collection: unknown; id: string }[] = [];
  let app: TestApp | null = null;
  const onCommand = (e: CommandStartedEvent) => {
    const filter = (e.command.filter ?? e.command.query) as { _id?: unknown } | undefined;
    commands.push({ name: e.commandName, collection: e.command[e.commandName], id: String(filter?._id ?? '') });
  };
  return {
    watch(t: TestApp): void {
      app = t;
      t.app.db.conn.getClient().on('commandStarted', onCommand);
    },
    unwatch(): void {
      app?.app.db.conn.getClient().off('commandStarted', onCommand);
    },
    async of<T>(collection: string, id: string, fn: () => Promise<T>): Promise<{ out: T; sent: string[] }> {
      await app!.app.services.get('events').flush();
      commands.length = 0;
      const out = await fn();
      return { out, sent: commands.filter((c) => c.collection === collection && c.id === id).map((c) => c.name) };
    },
  };
}
