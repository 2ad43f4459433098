import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, uniqueDbUri } from '../helpers/app.ts';
import { startReplicas, type ServerProcess } from '../helpers/processes.ts';

describe('two server processes on one database', () => {
  let a: ServerProcess;
  let b: ServerProcess;
  beforeAll(async () => {
    const uri = uniqueDbUri();
    [a, b] = (await startReplicas(2, { MONGODB_URI: uri })) as [ServerProcess, ServerProcess];
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
  });

  it('a tenant created through one is visible through the other, and SIGTERM exits 0', async () => {
    const created = await fetch(`${a.url}/admin/tenants`, {
      method: 'POST', headers: { 'X-API-Key': ADMIN_KEY, 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'shared' }),
    });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };
    const list = (await (await fetch(`${b.url}/admin/tenants?per_page=500`, { headers: { 'X-API-Key': ADMIN_KEY } })).json()) as { items: { id: string }[] };
    expect(list.items.map((t) => t.id)).toContain(id);
    expect(await b.stop()).toBe(0);
  });
});
