/**
 * Address classes of outbound webhook URLs: only globally routable unicast addresses pass; every
 * special range (ipaddr.js's table plus the rules it lacks) and every IPv6 form carrying such an
 * IPv4 address is refused, by the classification function and through `POST /webhook-endpoints`,
 * with a message naming the class and the setting that allows it. Redirects are not followed.
 * Nothing is sent anywhere but to receivers on 127.0.0.1: the public addresses are only
 * registered (disabled, with no event to deliver), never connected to.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, expectError, type TestApp } from '../helpers/app.ts';
import { webhooksPlugin } from '../../plugins/webhooks/index.ts';
import { refusedAs } from '../../plugins/webhooks/ssrf.ts';
import { outboundEventsPlugin } from '../fixtures/outbound-events-plugin.ts';
import { OUTBOUND_CONFIG, startReceiver, type Receiver } from './outbound-helpers.ts';

/** [address, the class the refusal names] */
const REFUSED: [string, string][] = [
  // IPv4 ranges of ipaddr.js's table
  ['0.1.2.3', 'an unspecified address'],
  ['10.1.2.3', 'a private address'],
  ['172.16.0.1', 'a private address'],
  ['192.168.1.1', 'a private address'],
  ['100.64.0.1', 'a carrier-grade NAT address'],
  ['127.0.0.1', 'a loopback address'],
  ['169.254.1.1', 'a link-local address'],
  ['169.254.169.254', 'a cloud metadata address'],
  ['192.0.0.8', 'a reserved address (documentation, benchmarking, future use)'],
  ['192.0.2.10', 'a reserved address (documentation, benchmarking, future use)'],
  ['198.51.100.7', 'a reserved address (documentation, benchmarking, future use)'],
  ['203.0.113.9', 'a reserved address (documentation, benchmarking, future use)'],
  ['198.18.0.1', 'a reserved address (documentation, benchmarking, future use)'],
  ['198.19.255.254', 'a reserved address (documentation, benchmarking, future use)'],
  ['192.88.99.1', 'a reserved address (documentation, benchmarking, future use)'],
  ['240.0.0.1', 'a reserved address (documentation, benchmarking, future use)'],
  ['255.255.255.255', 'a broadcast address'],
  ['224.0.0.1', 'a multicast address'],
  ['192.31.196.1', 'an AS112 DNS sink address'],
  ['192.52.193.1', 'an AMT relay address'],
  // IPv6 ranges of ipaddr.js's table
  ['::', 'an unspecified address'],
  ['::1', 'a loopback address'],
  ['fe80::1', 'a link-local address'],
  ['fc00::1', 'a unique-local address'],
  ['fd00:ec2::254', 'a cloud metadata address'],
  ['fec0::1', 'a site-local address'],
  ['ff02::1', 'a multicast address'],
  ['100::1', 'a discard-only address'],
  ['2001:db8::1', 'a reserved address (documentation, protocol assignments)'],
  ['3fff::1', 'a reserved address (documentation, protocol assignments)'],
  ['2001:2::1', 'a benchmarking address'],
  ['2001:20::1', 'an ORCHID identifier (not routable)'],
  ['5f00::1', 'a segment routing address'],
  // IPv6 that ipaddr.js calls unicast but is not globally routable (NOT_GLOBAL_V6)
  ['4000::1', 'an address outside the global unicast range 2000::/3'],
  ['1::1', 'an address outside the global unicast range 2000::/3'],
  // IPv4 carried in IPv6: judged by the IPv4 address
  ['::ffff:127.0.0.1', 'an IPv4-mapped address of 127.0.0.1, a loopback address'],
  ['::ffff:a9fe:a9fe', 'an IPv4-mapped address of 169.254.169.254, a cloud metadata address'],
  ['::7f00:1', 'an IPv4-compatible address of 127.0.0.1, a loopback address'],
  ['::a00:1', 'an IPv4-compatible address of 10.0.0.1, a private address'],
  ['::ffff:0:7f00:1', 'an IPv4-translated address of 127.0.0.1, a loopback address'],
  ['::ffff:0:c000:201', 'an IPv4-translated address of 192.0.2.1, a reserved address (documentation, benchmarking, future use)'],
  ['64:ff9b::a9fe:a9fe', 'a NAT64 address of 169.254.169.254, a cloud metadata address'],
  ['64:ff9b::7f00:1', 'a NAT64 address of 127.0.0.1, a loopback address'],
  ['64:ff9b:1::a00:1', 'a local-use NAT64 address (read with a /48 prefix) of 0.0.0.0, an unspecified address'],
  ['64:ff9b:1:a00:0:100::', 'a local-use NAT64 address (read with a /48 prefix) of 10.0.0.1, a private address'],
  ['2002:c0a8:101::1', 'a 6to4 address of 192.168.1.1, a private address'],
  ['2002:7f00:1::', 'a 6to4 address of 127.0.0.1, a loopback address'],
  // Teredo: the client's IPv4 address is the last 32 bits, inverted (0x80fffffe → 127.0.0.1)
  ['2001:0:4136:e378:8000:63bf:80ff:fffe', 'a Teredo address of 127.0.0.1, a loopback address'],
  ['2001:0:4136:e378:8000:63bf:5601:5656', 'a Teredo address of 169.254.169.169, a link-local address'],
];

/** Globally routable unicast: these pass. */
const ALLOWED = ['8.8.8.8', '1.1.1.1', '93.184.216.34', '2606:4700::1111', '2001:4860:4860::8888', '::ffff:8.8.8.8', '64:ff9b::808:808', '2002:808:808::1', '2001:0:4136:e378:8000:63bf:f7f7:f7f7'];

describe('refusedAs', () => {
  it.each(REFUSED)('refuses %s as %s', (address, why) => {
    expect(refusedAs(address)).toBe(why);
  });

  it.each(ALLOWED)('passes the globally routable %s', (address) => {
    expect(refusedAs(address)).toBeNull();
  });

  it('refuses what is not an IP address', () => {
    expect(refusedAs('example.com')).toBe('not an IP address');
  });
});

describe('registration', () => {
  let t: TestApp;
  let key: string;
  let recv: Receiver;
  let redirector: Server;
  let redirectorUrl: string;
  let redirects = 0;

  beforeAll(async () => {
    t = await buildTestApp({ plugins: [webhooksPlugin, outboundEventsPlugin], config: { ...OUTBOUND_CONFIG, WEBHOOK_ENDPOINTS_ALLOWED_HOSTS: '127.0.0.1,[::a9fe:a9fe]' } });
    key = (await createTenantUser(t, { roles: ['admin'] })).key;
    recv = await startReceiver();
    // Answers every request with a redirect to `recv` (also on 127.0.0.1).
    redirector = createServer((req, res) => {
      redirects++;
      req.resume();
      res.writeHead(307, { Location: recv.url }).end();
    });
    await new Promise<void>((res) => redirector.listen(0, '127.0.0.1', res));
    redirectorUrl = `http://127.0.0.1:${(redirector.address() as AddressInfo).port}/hook`;
  });
  afterAll(async () => {
    await t?.close();
    await recv?.close();
    await new Promise((res) => redirector?.close(res));
  });

  const create = (url: string) => t.http('POST', '/webhook-endpoints', { key, json: { url, event_types: ['*'], enabled: false } });
  const literal = (address: string) => `http://${address.includes(':') ? `[${address}]` : address}/hook`;

  it.each(REFUSED)('refuses a URL with %s: 422 naming %s and WEBHOOK_ENDPOINTS_ALLOWED_HOSTS', async (address, why) => {
    // 127.0.0.1 is allowed in this app (the receivers): the name localhost stands for it below.
    if (address === '127.0.0.1') return;
    const url = literal(address);
    const err = expectError(await create(url), 422, 'VALIDATION_ERROR');
    const host = new URL(url).hostname.replace(/^\[(.*)\]$/, '$1');
    expect(err.details.errors).toEqual([{ loc: ['body', 'url'], msg: `refused: ${host} is ${why}; to allow it, add the host to WEBHOOK_ENDPOINTS_ALLOWED_HOSTS`, type: 'unsafe_url' }]);
  });

  it('names the setting when a name resolves to a refused address', async () => {
    const err = expectError(await create('http://localhost/hook'), 422, 'VALIDATION_ERROR');
    expect((err.details.errors as { msg: string }[])[0]!.msg).toMatch(/^refused: host localhost resolves to (127\.0\.0\.1|::1), a loopback address; to allow it, add the host to WEBHOOK_ENDPOINTS_ALLOWED_HOSTS$/);
  });

  it('accepts the globally routable addresses (saved disabled: nothing is sent to them)', async () => {
    for (const address of ALLOWED) {
      const res = await create(literal(address));
      expect(res.status, address).toBe(201);
      expect((await t.http('DELETE', `/webhook-endpoints/${res.body.id}`, { key })).status).toBe(204);
    }
  });

  it('accepts a refused address whose host is in WEBHOOK_ENDPOINTS_ALLOWED_HOSTS, as written', async () => {
    expect((await create('http://[::a9fe:a9fe]/hook')).status).toBe(201);
    expectError(await create('http://[::a9fe:a9fd]/hook'), 422, 'VALIDATION_ERROR');
  });

  it('does not follow a redirect: the 307 is a failed attempt and its target gets nothing', async () => {
    const ep = await t.http('POST', '/webhook-endpoints', { key, json: { url: redirectorUrl, event_types: ['ping'] } });
    expect(ep.status).toBe(201);
    const res = await t.http('POST', `/webhook-endpoints/${ep.body.id}/test`, { key });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'pending', attempts: 1, last_attempt: { status: 307, error: 'HTTP 307' } });
    expect(redirects).toBe(1);
    expect(recv.requests).toHaveLength(0);
  });
});
