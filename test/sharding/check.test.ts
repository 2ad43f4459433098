/**
 * The sharding check itself (run over the whole suite's recorded commands by the global teardown,
 * test/helpers/global-setup.ts): what it flags and what it lets through.
 */
import { describe, expect, it } from 'vitest';
import { carriesTenant, filterShape, type CommandRecord, type LogRecord } from '../helpers/command-log.ts';
import { analyse } from './check.ts';
import { ALLOWED_CROSS_TENANT } from './allowlist.ts';

const coll = (collection: string, tenantScoped: boolean, indexes: string[][] = []): LogRecord => ({ kind: 'collection', collection, tenantScoped, indexes });
const cmd = (collection: string, shape: string, tenant: boolean, origin: CommandRecord['origin'] = 'request', op = 'find'): CommandRecord =>
  ({ kind: 'command', collection, op, shape, tenant, origin, file: 'x.test.ts' });

describe('filter shapes', () => {
  it('keep field names only, sorted, with alternatives folded in', () => {
    expect(filterShape({ name: 'a', tenant_id: 'x', $or: [{ a: 1 }, { b: { $gt: 2 } }] })).toBe('$or[a|b],name,tenant_id');
  });
  it('carry the tenant directly, in one $and branch, or in every $or branch', () => {
    expect(carriesTenant({ tenant_id: 'x', a: 1 })).toBe(true);
    expect(carriesTenant({ $and: [{ a: 1 }, { tenant_id: 'x' }] })).toBe(true);
    expect(carriesTenant({ $or: [{ tenant_id: 'x' }, { tenant_id: 'y', a: 1 }] })).toBe(true);
    expect(carriesTenant({ $or: [{ tenant_id: 'x' }, { a: 1 }] })).toBe(false);
    expect(carriesTenant({ a: 1 })).toBe(false);
  });
});

describe('the check', () => {
  const records: LogRecord[] = [coll('things', true, [['tenant_id', 'name']]), coll('bare', true), coll('global', false)];

  it('flags a tenant user request on a tenant-scoped collection without tenant_id', () => {
    const r = analyse([...records, cmd('things', 'name', false)]);
    expect(r.crossTenant.map((c) => c.shape)).toEqual(['name']);
  });

  it('lets through tenant-carrying queries, collections without tenant_id, and listed operations', () => {
    const r = analyse([...records, cmd('things', 'name,tenant_id', true), cmd('global', 'name', false), cmd('things', 'x', false, 'background'), cmd('things', 'y', false, 'system-request')]);
    expect(r.crossTenant).toEqual([]);
    expect(r.tenantScoped).toEqual(['bare', 'things']);
  });

  it('flags a tenant-carrying query on a collection with no index led by tenant_id (indexes from schemas or the database)', () => {
    expect(analyse([...records, cmd('bare', 'tenant_id', true)]).unindexed.map((c) => c.collection)).toEqual(['bare']);
    expect(analyse([...records, cmd('bare', 'tenant_id', true)], new Map([['bare', [['tenant_id', 'created_at']]]])).unindexed).toEqual([]);
  });

  it('every allowlist entry gives its reason', () => {
    for (const a of ALLOWED_CROSS_TENANT) expect(a.reason.length).toBeGreaterThan(20);
  });
});
