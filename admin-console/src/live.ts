/**
 * Live updates through GraphQL subscriptions (graphql-ws on /graphql, authenticated with the
 * session's bearer token in `connection_init`): no list in the console polls. One socket per
 * session, opened lazily, closed on sign-out.
 */
import { print } from '@0no-co/graphql.web';
import type { TadaDocumentNode } from 'gql.tada';
import { createClient, type Client } from 'graphql-ws';
import { effect } from '@preact/signals';
import { useEffect, useRef } from 'preact/hooks';
import { session } from './api.ts';

let client: Client | null = null;
let token: string | null = null;

effect(() => {
  const t = session.value?.token ?? null;
  if (t !== token && client) {
    void client.dispose();
    client = null;
  }
  token = t;
});

function socket(): Client | null {
  if (!token) return null;
  if (!client) {
    const auth = `Bearer ${token}`;
    client = createClient({
      url: `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/graphql`,
      connectionParams: { authorization: auth },
      lazy: true,
      retryAttempts: 5,
    });
  }
  return client;
}

/** Subscribes while mounted (and while `variables` is not null); `onNext` gets each result's data. */
export function useLive<R, V extends Record<string, unknown>>(doc: TadaDocumentNode<R, V>, variables: V | null, onNext: (data: R) => void, deps: unknown[]): void {
  const cb = useRef(onNext);
  cb.current = onNext;
  useEffect(() => {
    const c = variables ? socket() : null;
    if (!c || !variables) return;
    return c.subscribe(
      { query: print(doc), variables },
      { next: (m) => m.data && cb.current(m.data as R), error: () => undefined, complete: () => undefined },
    );
  }, deps);
}
