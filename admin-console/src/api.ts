/**
 * The one way to the server: POST /graphql. The session (bearer token and the signed-in user) is
 * kept in memory only: a reload signs out. An expired or revoked token ends the session and the
 * sign-in form says so.
 */
import { print } from '@0no-co/graphql.web';
import type { TadaDocumentNode } from 'gql.tada';
import { signal } from '@preact/signals';
import type { ResultOf } from './graphql.ts';
import type { Me } from './graphql.ts';

export type User = NonNullable<ResultOf<typeof Me>['me']>;
export interface Session {
  token: string;
  user: User;
  expiresAt: number;
}

export const session = signal<Session | null>(null);
/** Why the user was signed out (shown on the sign-in form). */
export const signedOutReason = signal<string | null>(null);

export interface Issue {
  loc: (string | number)[];
  msg: string;
}

/** A GraphQL or HTTP failure, with the server's code, details and request id. */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly status: number,
    readonly details: Record<string, unknown>,
    readonly requestId: string | null,
  ) {
    super(message);
  }
  get issues(): Issue[] {
    return (this.details.errors as Issue[] | undefined) ?? [];
  }
}

interface GqlResponse {
  data?: unknown;
  /** The REST error envelope: what a refused credential gets before GraphQL runs. */
  error?: { code: string; message: string; details?: Record<string, unknown> };
  request_id?: string;
  errors?: { message: string; extensions?: { code?: string; status?: number; details?: Record<string, unknown>; request_id?: string } }[];
}

/** Runs a document as the signed-in user (or with `auth`); throws ApiError on any error. */
export async function request(query: string, variables: Record<string, unknown> = {}, auth?: { apiKey?: string; token?: string }): Promise<unknown> {
  const headers: Record<string, string> = { 'Content-Type': 'application/json', Accept: 'application/json' };
  const token = auth ? auth.token : session.value?.token;
  if (auth?.apiKey) headers['X-API-Key'] = auth.apiKey;
  else if (token) headers.Authorization = `Bearer ${token}`;
  let res: Response;
  try {
    res = await fetch('/graphql', { method: 'POST', headers, body: JSON.stringify({ query, variables }) });
  } catch {
    throw new ApiError('The server cannot be reached', 'NETWORK_ERROR', 0, {}, null);
  }
  const requestId = res.headers.get('X-Request-Id');
  let body: GqlResponse;
  try {
    body = (await res.json()) as GqlResponse;
  } catch {
    throw new ApiError(`Unexpected answer (HTTP ${res.status})`, 'BAD_RESPONSE', res.status, {}, requestId);
  }
  const first = body.errors?.[0];
  const envelope = body.error;
  if (first || envelope || !res.ok) {
    const x = first?.extensions ?? {};
    const err = first
      ? new ApiError(first.message, x.code ?? 'ERROR', x.status ?? res.status, x.details ?? {}, x.request_id ?? requestId)
      : new ApiError(envelope?.message ?? `HTTP ${res.status}`, envelope?.code ?? 'ERROR', res.status, envelope?.details ?? {}, body.request_id ?? requestId);
    if (err.code === 'AUTH_REQUIRED' && !auth && session.value) {
      session.value = null;
      signedOutReason.value = 'Your session has expired or was revoked. Sign in again.';
    }
    throw err;
  }
  return body.data;
}

/** A typed document (graphql.ts). */
export const run = async <R, V extends Record<string, unknown>>(doc: TadaDocumentNode<R, V>, variables?: V, auth?: { apiKey?: string; token?: string }): Promise<R> =>
  (await request(print(doc), variables ?? {}, auth)) as R;

export const isAdmin = (u: User | undefined) => !!u && (u.roles.includes('admin') || u.scope === 'system');
export const isSystem = (u: User | undefined) => !!u && u.scope === 'system';
