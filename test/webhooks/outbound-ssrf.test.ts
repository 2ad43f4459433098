/**
 * The address check at delivery time, with an injected resolver (the sender's constructor
 * dependency): a name that resolved to a public address when saved and to a private one now
 * (DNS rebinding) fails its attempt with a clear error and no connection; a name resolving to a
 * loopback address allowed by WEBHOOK_ENDPOINTS_ALLOWED_HOSTS is connected to at the checked
 * address. No packet leaves loopback: the transport is a recorder, or the receiver on 127.0.0.1.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { systemActor } from '../../core/context.ts';
import { Tenancy } from '../../core/tenancy.ts';
import { AppError } from '../../core/errors.ts';
import { createOutbound } from '../../plugins/webhooks/outbound.ts';
import type { Transport } from '../../plugins/webhooks/transport.ts';
import type { Resolver } from '../../plugins/webhooks/ssrf.ts';
import { outboundEventTypes, type Receiver, startReceiver } from './outbound-helpers.ts';

let t: TestApp;
let recv: Receiver;
const actor = systemActor(new Types.ObjectId().toHexString());

beforeAll(async () => {
  t = await buildTestApp({ plugins: [outboundEventTypes], config: { RATE_LIMIT_ENABLED: 'false' } });
  recv = await startReceiver();
});
afterAll(async () => {
  await t?.close();
  await recv?.close();
});

function stack(resolver: Resolver, opts: { allowedHosts?: string[]; transport?: Transport; production?: boolean } = {}) {
  const config = {
    ...t.app.config, WEBHOOK_ENDPOINTS_ALLOWED_HOSTS: opts.allowedHosts ?? [], WEBHOOK_DELIVERY_TIMEOUT_MS: 2000,
    ...(opts.production ? { NODE_ENV: 'production' as const } : {}),
  };
  return createOutbound({
    db: t.app.db.conn, config, tenancy: new Tenancy(true), events: t.app.services.get('events'), log: t.app.log, metrics: t.app.services.get('metrics'),
    resolver, ...(opts.transport ? { transport: opts.transport } : {}),
  });
}

function recorder() {
  const calls: Parameters<Transport>[0][] = [];
  const transport: Transport = async (req) => {
    calls.push(req);
    return { status: 200, excerpt: '', error: null };
  };
  return { calls, transport };
}

describe('delivery-time address check', () => {
  it('fails the attempt of a name now resolving to a private address, without connecting', async () => {
    const answers = [[{ address: '93.184.216.34', family: 4 }], [{ address: '10.1.2.3', family: 4 }]];
    const asked: string[] = [];
    const resolver: Resolver = async (host) => {
      asked.push(host);
      return answers[Math.min(asked.length - 1, 1)]!;
    };
    const { calls, transport } = recorder();
    const o = stack(resolver, { transport });
    const ep = await o.endpoints.create(actor, { url: 'http://rebind.example/hook', event_types: ['ping'], enabled: true });
    const d = await o.endpoints.test(actor, ep.id);
    expect(asked).toEqual(['rebind.example', 'rebind.example']);
    expect(calls).toHaveLength(0);
    expect(d).toMatchObject({ status: 'pending', attempts: 1, last_attempt: { status: null, response_excerpt: null } });
    expect(d.last_attempt!.error).toBe('refused: host rebind.example resolves to 10.1.2.3, a private address; to allow it, add the host to WEBHOOK_ENDPOINTS_ALLOWED_HOSTS');
  });

  it('judges an address carrying IPv4 by that address at delivery: NAT64 of the metadata address, 6to4 of loopback', async () => {
    for (const [address, why] of [
      ['64:ff9b::a9fe:a9fe', 'a NAT64 address of 169.254.169.254, a cloud metadata address'],
      ['2002:7f00:1::1', 'a 6to4 address of 127.0.0.1, a loopback address'],
    ]) {
      let calls = 0;
      const resolver: Resolver = async () => (calls++ ? [{ address: address!, family: 6 }] : [{ address: '2606:4700::1111', family: 6 }]);
      const rec = recorder();
      const o = stack(resolver, { transport: rec.transport });
      const ep = await o.endpoints.create(actor, { url: 'https://nat64.example/hook', event_types: ['ping'], enabled: true });
      const d = await o.endpoints.test(actor, ep.id);
      expect(rec.calls).toHaveLength(0);
      expect(d.last_attempt!.error).toBe(`refused: host nat64.example resolves to ${address}, ${why}; to allow it, add the host to WEBHOOK_ENDPOINTS_ALLOWED_HOSTS`);
    }
  });

  it('refuses at creation a name resolving to a private address among public ones', async () => {
    const resolver: Resolver = async () => [{ address: '93.184.216.34', family: 4 }, { address: 'fd12::1', family: 6 }];
    const o = stack(resolver);
    const err = await o.endpoints.create(actor, { url: 'https://mixed.example/', event_types: ['ping'], enabled: true }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).details.errors).toEqual([expect.objectContaining({ loc: ['body', 'url'], msg: 'refused: host mixed.example resolves to fd12::1, a unique-local address; to allow it, add the host to WEBHOOK_ENDPOINTS_ALLOWED_HOSTS' })]);
  });

  it('checks an IP literal again at delivery: allowed when saved, no longer allowed now', async () => {
    const noDns: Resolver = async () => {
      throw new Error('no lookup expected');
    };
    const saved = stack(noDns, { allowedHosts: ['127.0.0.1'] });
    const ep = await saved.endpoints.create(actor, { url: recv.url, event_types: ['ping'], enabled: true });
    const { calls, transport } = recorder();
    const now = stack(noDns, { transport });
    const d = await now.endpoints.test(actor, ep.id);
    expect(calls).toHaveLength(0);
    expect(d.last_attempt!.error).toBe('refused: 127.0.0.1 is a loopback address; to allow it, add the host to WEBHOOK_ENDPOINTS_ALLOWED_HOSTS');
    expect(recv.requests).toHaveLength(0);
  });

  it('connects to the checked address of an allowed name (the lookup is pinned)', async () => {
    const resolver: Resolver = async (host) => (host === 'receiver.example' ? [{ address: '127.0.0.1', family: 4 }] : []);
    const o = stack(resolver, { allowedHosts: ['receiver.example'] });
    const url = recv.url.replace('127.0.0.1', 'receiver.example');
    const ep = await o.endpoints.create(actor, { url, event_types: ['ping'], enabled: true });
    const d = await o.endpoints.test(actor, ep.id);
    expect(d).toMatchObject({ status: 'delivered', last_attempt: { status: 200 } });
    expect(recv.requests).toHaveLength(1);
    expect(recv.requests[0]!.headers.host).toBe(new URL(url).host);
  });

  it('in production refuses an http URL, at creation and at delivery', async () => {
    const resolver: Resolver = async () => [{ address: '93.184.216.34', family: 4 }];
    const prod = stack(resolver, { production: true });
    const err = await prod.endpoints.create(actor, { url: 'http://public.example/', event_types: ['ping'], enabled: true }).catch((e: unknown) => e);
    expect((err as AppError).details.errors).toEqual([expect.objectContaining({ loc: ['body', 'url'], msg: 'must use https' })]);
    const ep = await stack(resolver).endpoints.create(actor, { url: 'http://public.example/', event_types: ['ping'], enabled: true });
    const { calls, transport } = recorder();
    const d = await stack(resolver, { production: true, transport }).endpoints.test(actor, ep.id);
    expect(calls).toHaveLength(0);
    expect(d.last_attempt!.error).toBe('refused: the URL must use https');
  });
});
