/**
 * Shared by the outbound webhook tests: a local receiver on 127.0.0.1 recording every request (and
 * answering what the test says), the app settings they run with, and a poll-until helper.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { vi } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { definePlugin } from '../../core/plugin.ts';
import { OUTBOUND_EVENT_TYPES } from '../../plugins/webhooks/outbound.ts';

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
}

export interface Receiver {
  url: string;
  requests: Received[];
  /** Status to answer with, per request (default 200). */
  respond: (r: Received) => number;
  /** Requests whose signature verifies with `secret` (Standard Webhooks `Webhook.verify`). */
  verified(secret: string): Received[];
  close(): Promise<void>;
}

/** A receiver listening on a free port of 127.0.0.1 (the only address tests send to). */
export async function startReceiver(path = '/hook'): Promise<Receiver> {
  const r: Receiver = {
    url: '',
    requests: [],
    respond: () => 200,
    verified: (secret) => r.requests.filter((q) => verifies(secret, q)),
    close: () => new Promise<void>((res) => server.close(() => res())),
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const rec = { headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() };
      r.requests.push(rec);
      res.statusCode = r.respond(rec);
      res.end(res.statusCode < 300 ? 'ok' : `nope ${'x'.repeat(600)}`);
    });
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
  r.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`;
  return r;
}

export function verifies(secret: string, q: Received): boolean {
  try {
    new Webhook(secret).verify(q.body, q.headers as Record<string, string>);
    return true;
  } catch {
    return false;
  }
}

/** Settings of the outbound tests: fast polls, a short retry schedule, loopback receivers allowed. */
export const OUTBOUND_CONFIG = {
  WEBHOOKS_ENABLED: 'true',
  WEBHOOK_ENDPOINTS_ALLOWED_HOSTS: '127.0.0.1',
  WEBHOOK_DELIVERY_RETRY_SCHEDULE: '0,1,1',
  WEBHOOK_DELIVERY_POLL_INTERVAL_MS: '50',
  WEBHOOK_DELIVERY_TIMEOUT_MS: '2000',
  EVENTS_POLL_INTERVAL_MS: '50',
  RATE_LIMIT_ENABLED: 'false',
};

/** Polls `fn` every 50 ms until it returns a truthy value, which it resolves to (fails after `ms`). */
export const until = <T>(fn: () => Promise<T | null | undefined | false> | T | null | undefined | false, ms = 10_000): Promise<T> =>
  vi.waitUntil(fn as () => Promise<T>, { timeout: ms, interval: 50 });

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Declares the `webhook_delivery.*` event types in an app whose webhooks plugin is off: the outbound
 * stacks a test builds (never started) write those events for their attempts.
 */
export const outboundEventTypes = definePlugin({ name: 'outbound-event-types', setup: () => ({ eventTypes: OUTBOUND_EVENT_TYPES }) });
