/**
 * Small helpers shared by the read-path suites (list-*, pagination, populate, isolation,
 * cursor-walk). Seeding goes through the public API; the few direct collection writes are
 * test SETUP only (states the API cannot produce, e.g. a missing field or a cross-tenant link).
 */
import { Types } from 'mongoose';
import { expect } from 'vitest';
import type { HttpResult, TestApp } from '../helpers/app.ts';

export type Doc = Record<string, any>;

/** `?a=1&b=x y` with every value URL-encoded; objects are JSON-encoded (for `where`). */
export function qs(params: Record<string, string | number | boolean | object | undefined>): string {
  const parts = Object.entries(params)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(typeof v === 'object' ? JSON.stringify(v) : String(v))}`);
  return parts.length ? `?${parts.join('&')}` : '';
}

/** Creates documents one by one through `POST <path>` and returns them in order. */
export async function seed(t: TestApp, path: string, key: string, items: Doc[], headers?: Record<string, string>): Promise<Doc[]> {
  const out: Doc[] = [];
  for (const item of items) {
    const res = await t.http('POST', path, { key, json: item, ...(headers ? { headers } : {}) });
    if (res.status !== 201) throw new Error(`seed ${path}: ${res.status} ${JSON.stringify(res.body)}`);
    out.push(res.body);
  }
  return out;
}

/** Creates up to 100 projects in one `POST /projects/bulk`. */
export async function seedProjects(t: TestApp, key: string, items: Doc[], headers?: Record<string, string>): Promise<Doc[]> {
  const res = await t.http('POST', '/projects/bulk', { key, json: { items }, ...(headers ? { headers } : {}) });
  if (res.status !== 201) throw new Error(`bulk: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.items as Doc[];
}

/** Asserts a 200 list answer and returns its items. */
export function items(res: HttpResult<any>): Doc[] {
  if (res.status !== 200) throw new Error(`expected 200, got ${res.status}: ${JSON.stringify(res.body)}`);
  expect(Array.isArray(res.body.items)).toBe(true);
  return res.body.items as Doc[];
}

export const sortedNames = (res: HttpResult<any>): string[] => items(res).map((d) => String(d.name)).sort();
export const idsOf = (docs: Doc[]): string[] => docs.map((d) => String(d._id));

/** Direct collection access for test SETUP only. */
export const collection = (t: TestApp, name: string) => t.app.db.conn.collection(name);
export const oid = (hex: string) => new Types.ObjectId(hex);
