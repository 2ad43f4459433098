/**
 * Shared by the domain-event tests (payments, jobs, inbound webhooks, privacy): reading the event
 * log through `GET /events` and `GET /events/types`, and a small JSON Schema conformance check of an
 * event's `data` against its catalogue schema (types, `required`, `additionalProperties: false`).
 */
import { expect } from 'vitest';
import type { TestApp } from '../helpers/app.ts';
import { scaled } from '../helpers/wait.ts';

type Json = Record<string, any>;

/** Events of `type` the caller (`key`) reads, newest first, once `pick` finds `count` of them. */
export async function eventsOfType(t: TestApp, key: string, type: string, pick: (e: Json) => boolean, count = 1, ms = 15_000): Promise<Json[]> {
  const end = Date.now() + scaled(ms);
  for (;;) {
    const r = await t.http('GET', `/events?type=${encodeURIComponent(type)}&limit=100`, { key });
    expect(r.status).toBe(200);
    const mine = (r.body.items as Json[]).filter(pick);
    if (mine.length >= count) return mine;
    if (Date.now() > end) throw new Error(`${type}: ${mine.length} of ${count} events; log: ${JSON.stringify(r.body).slice(0, 500)}`);
    await new Promise((res) => setTimeout(res, 50));
  }
}

/** What another reader (`key`) sees of `type`: the events `pick` finds (expected empty for another tenant). */
export async function visibleTo(t: TestApp, key: string, type: string, pick: (e: Json) => boolean): Promise<Json[]> {
  const r = await t.http('GET', `/events?type=${encodeURIComponent(type)}&limit=100`, { key });
  expect(r.status).toBe(200);
  return (r.body.items as Json[]).filter(pick);
}

/** The catalogue entries of `names` (each asserted present, with the plugin that declares it and an object schema). */
export async function catalogue(t: TestApp, key: string, names: string[], plugin: string): Promise<Record<string, Json>> {
  const r = await t.http('GET', '/events/types', { key });
  expect(r.status).toBe(200);
  const out: Record<string, Json> = {};
  for (const name of names) {
    const entry = (r.body.items as Json[]).find((x) => x.name === name);
    expect(entry, `${name} in /events/types`).toBeTruthy();
    expect(entry).toMatchObject({ name, plugin, description: expect.any(String), schema: { type: 'object', properties: expect.any(Object) } });
    out[name] = entry!;
  }
  return out;
}

const typeOf = (v: unknown): string => (v === null ? 'null' : Array.isArray(v) ? 'array' : Number.isInteger(v) ? 'integer' : typeof v);

/** Where `value` breaks `schema` (the subset zod's JSON Schema output uses); empty when it conforms. */
export function violations(schema: Json, value: unknown, path = 'data'): string[] {
  if (schema.anyOf) {
    const each = (schema.anyOf as Json[]).map((s) => violations(s, value, path));
    return each.some((e) => !e.length) ? [] : [`${path}: matches no alternative (${each.map((e) => e.join('; ')).join(' | ')})`];
  }
  if (schema.type) {
    const types = ([] as string[]).concat(schema.type);
    const actual = typeOf(value);
    if (!types.includes(actual) && !(actual === 'integer' && types.includes('number'))) return [`${path}: ${actual}, expected ${types.join('/')}`];
  }
  if (schema.enum && !(schema.enum as unknown[]).includes(value)) return [`${path}: ${JSON.stringify(value)} not in ${JSON.stringify(schema.enum)}`];
  if (schema.format === 'date-time' && typeof value === 'string' && Number.isNaN(Date.parse(value))) return [`${path}: not a date-time`];
  const out: string[] = [];
  if (typeOf(value) === 'object') {
    const obj = value as Json;
    for (const k of (schema.required as string[] | undefined) ?? []) if (!(k in obj)) out.push(`${path}.${k}: missing`);
    const props = (schema.properties ?? {}) as Record<string, Json>;
    for (const [k, v] of Object.entries(obj)) {
      if (props[k]) out.push(...violations(props[k], v, `${path}.${k}`));
      else if (schema.additionalProperties === false) out.push(`${path}.${k}: not in the schema`);
    }
  }
  if (typeOf(value) === 'array' && schema.items) (value as unknown[]).forEach((v, i) => out.push(...violations(schema.items, v, `${path}[${i}]`)));
  return out;
}

/** Asserts that `data` conforms to the catalogue schema of its type. */
export function expectConforms(entry: Json, data: unknown): void {
  expect(violations(entry.schema, data)).toEqual([]);
}
