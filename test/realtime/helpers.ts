import { createParser, type EventSourceMessage } from 'eventsource-parser';
import WebSocket from 'ws';
import { createClient, type Client } from 'graphql-ws';
import { ADMIN_KEY } from '../helpers/app.ts';

/** Polls `fn` until it returns a truthy value (or throws after `ms`). */
export async function until<T>(fn: () => T | Promise<T>, ms = 15_000, what = 'condition'): Promise<NonNullable<T>> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v as NonNullable<T>;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** An open server-sent event stream: what arrived so far, whether it ended, and a way to leave. */
export interface SseStream {
  status: number;
  headers: Headers;
  /** The error envelope when the server refused the stream. */
  body?: any;
  events: EventSourceMessage[];
  comments: string[];
  ended: boolean;
  /** Parsed `data` of the events of `type` (or all). */
  data(type?: string): any[];
  close(): void;
}

/** Opens `url` as an SSE stream with a streaming fetch reader (as browsers' fetch-based clients do). */
export async function openSse(url: string, headers: Record<string, string> = {}, init: { method?: string; body?: string } = {}): Promise<SseStream> {
  const abort = new AbortController();
  const res = await fetch(url, { headers: { Accept: 'text/event-stream', ...headers }, signal: abort.signal, ...init });
  const s: SseStream = {
    status: res.status, headers: res.headers, events: [], comments: [], ended: false,
    data: (type) => s.events.filter((e) => !type || e.event === type).map((e) => JSON.parse(e.data)),
    close: () => abort.abort(),
  };
  if (!(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    s.body = await res.json().catch(() => null);
    s.ended = true;
    return s;
  }
  const parser = createParser({ onEvent: (e) => s.events.push(e), onComment: (c) => s.comments.push(c) });
  void (async () => {
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        parser.feed(value);
      }
    } catch {
      // aborted by close()
    } finally {
      s.ended = true;
    }
  })();
  return s;
}

/** `GET /events/stream` with an API key (default: the bootstrap admin's). */
export const eventStream = (base: string, opts: { key?: string; token?: string; query?: string; headers?: Record<string, string> } = {}) => {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.token) headers.Authorization = `Bearer ${opts.token}`;
  else if (opts.key !== '') headers['X-API-Key'] = opts.key ?? ADMIN_KEY;
  return openSse(`${base}/events/stream${opts.query ? `?${opts.query}` : ''}`, headers);
};

/** What a subscription received: results, errors, and whether it completed. */
export interface Sub {
  results: any[];
  errors: any[];
  done: boolean;
  /** `data[field]` of every result. */
  values(field: string): any[];
  dispose(): void;
}

/** A graphql-ws client on the app's `/graphql` (ws package as the WebSocket implementation). */
export function wsClient(base: string, connectionParams: Record<string, unknown> | (() => Record<string, unknown>), onClosed?: (e: unknown) => void): Client {
  return createClient({
    url: base.replace(/^http/, 'ws') + '/graphql',
    webSocketImpl: WebSocket,
    connectionParams,
    retryAttempts: 0,
    lazy: true,
    ...(onClosed ? { on: { closed: onClosed } } : {}),
  });
}

export function subscribe(client: Client, query: string, variables: Record<string, unknown> = {}): Sub {
  const s: Sub = {
    results: [], errors: [], done: false,
    values: (field) => s.results.filter((r) => r.data?.[field]).map((r) => r.data[field]),
    dispose: () => unsubscribe(),
  };
  const unsubscribe = client.subscribe(
    { query, variables },
    {
      next: (r) => {
        s.results.push(r);
        if (r.errors) s.errors.push(...r.errors);
      },
      error: (e) => {
        s.errors.push(...(Array.isArray(e) ? e : [e]));
        s.done = true;
      },
      complete: () => (s.done = true),
    },
  );
  return s;
}

/** A GraphQL subscription over SSE (Yoga's GraphQL over SSE, "distinct connections" mode). */
export async function sseSubscribe(base: string, query: string, variables: Record<string, unknown>, headers: Record<string, string>) {
  const s = await openSse(`${base}/graphql`, { 'Content-Type': 'application/json', ...headers }, { method: 'POST', body: JSON.stringify({ query, variables }) });
  return Object.assign(s, { results: () => s.data('next') });
}

export const EVENT_FIELDS = 'id type tenant_id data actor created_at';

/**
 * The graphql-ws clients and subscriptions of one test file, against the app at `base()`, all
 * disposed by `disposeAll()` (in `afterAll`, before the app closes).
 */
export function wsTracker(base: () => string) {
  const clients: Client[] = [];
  const subs: Sub[] = [];
  return {
    client(params: Record<string, unknown>, onClosed?: (e: unknown) => void): Client {
      const c = wsClient(base(), params, onClosed);
      clients.push(c);
      return c;
    },
    sub(c: Client, query: string, variables: Record<string, unknown> = {}): Sub {
      const s = subscribe(c, query, variables);
      subs.push(s);
      return s;
    },
    async disposeAll(): Promise<void> {
      for (const s of subs) s.dispose();
      await Promise.all(clients.map((c) => c.dispose()));
    },
  };
}

/** The `events` and `resourceChanged` subscriptions with every event field. */
export const EVENTS_SUBSCRIPTION = `subscription($types: [String!]) { events(types: $types) { ${EVENT_FIELDS} } }`;
