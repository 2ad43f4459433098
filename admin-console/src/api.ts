/**
 * The one way to the server: POST /graphql. The session (bearer token and the signed-in user) is
 * kept in memory only: a reload signs out. The session ends when the token's lifetime (the
 * exchange's `expires_in`) has passed, or when the API refuses the token (AUTH_REQUIRED: expired,
 * its key revoked, its user disabled); the sign-in form then says why.
 */
import { print } from '@0no-co/graphql.web';
import type { TadaDocumentNode } from 'gql.tada';
import { effect, signal } from '@preact/signals';
import type { ResultOf } from './graphql.ts';
import type { Me } from './graphql.ts';

export type User = NonNullable<ResultOf<typeof Me>['me']>;
export interface Session {
  token: string;
  user: User;
  /** When the token expires, in this browser's clock (`Date.now()` at the exchange + `expires_in`). */
  expiresAt: number;
}

export const session = signal<Session | null>(null);
/** Why the user was signed out (shown on the sign-in form). */
export const signedOutReason = signal<string | null>(null);
/**
 * The tenant a system administrator acts for (sent as `X-Tenant-Id` with every request), or null for
 * their own view of every tenant. Chosen in the header; forgotten when the session ends.
 */
export const actingTenant = signal<{ id: string; name: string } | null>(null);
/** Requests in flight (the shell shows "Loading…" when one lasts longer than 300 ms). */
export const pending = signal(0);

export const EXPIRED = 'Your session expired. Sign in again to continue.';
export const ENDED = 'Your session has ended (its key was revoked or its user disabled). Sign in again.';

/**
 * A little before the server's `exp`: a request sent in the last seconds would otherwise reach the
 * server after it and fail.
 */
const EXPIRY_MARGIN_MS = 5_000;

/** The session's end time from a token exchange's `expires_in` (seconds). */
export const expiresAtOf = (expiresIn: number): number => Date.now() + Math.max(0, expiresIn * 1000 - EXPIRY_MARGIN_MS);

/** Ends the session (the token is dropped) and shows the sign-in form with `reason`. */
export function endSession(reason: string): void {
  session.value = null;
  signedOutReason.value = reason;
}

const expired = (s: Session) => Date.now() >= s.expiresAt;

// Sign out when the token's lifetime is over, even if the console is idle (no request to be refused).
let expiryTimer: ReturnType<typeof setTimeout> | undefined;
effect(() => {
  clearTimeout(expiryTimer);
  const s = session.value;
  if (!s) return;
  const check = () => {
    if (session.value !== s) return;
    if (expired(s)) endSession(EXPIRED);
    // Timers longer than ~24.8 days overflow; a long lifetime is checked again later.
    else expiryTimer = setTimeout(check, Math.min(s.expiresAt - Date.now(), 2 ** 31 - 1));
  };
  check();
});

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
  const current = session.value;
  // A background tab's timers are throttled: the lifetime is checked again before each request.
  if (!auth && current && expired(current)) {
    endSession(EXPIRED);
    throw new ApiError(EXPIRED, 'AUTH_REQUIRED', 401, {}, null);
  }
  const token = auth ? auth.token : current?.token;
  if (auth?.apiKey) headers['X-API-Key'] = auth.apiKey;
  else if (token) headers.Authorization = `Bearer ${token}`;
  if (!auth && actingTenant.value) headers['X-Tenant-Id'] = actingTenant.value.id;
  let res: Response;
  let body: GqlResponse;
  pending.value++;
  try {
    try {
      res = await fetch('/graphql', { method: 'POST', headers, body: JSON.stringify({ query, variables }) });
    } catch {
      throw new ApiError('The server cannot be reached', 'NETWORK_ERROR', 0, {}, null);
    }
    try {
      body = (await res.json()) as GqlResponse;
    } catch {
      throw new ApiError(`Unexpected answer (HTTP ${res.status})`, 'BAD_RESPONSE', res.status, {}, res.headers.get('X-Request-Id'));
    }
  } finally {
    pending.value--;
  }
  const requestId = res.headers.get('X-Request-Id');
  const first = body.errors?.[0];
  const envelope = body.error;
  if (first || envelope || !res.ok) {
    const x = first?.extensions ?? {};
    const err = first
      ? new ApiError(first.message, x.code ?? 'ERROR', x.status ?? res.status, x.details ?? {}, x.request_id ?? requestId)
      : new ApiError(envelope?.message ?? `HTTP ${res.status}`, envelope?.code ?? 'ERROR', res.status, envelope?.details ?? {}, body.request_id ?? requestId);
    // Only the session's own token: a refused API key on the sign-in form is that form's error.
    if (err.code === 'AUTH_REQUIRED' && !auth && session.value?.token === token) endSession(/expired/i.test(err.message) ? EXPIRED : ENDED);
    throw err;
  }
  return body.data;
}

/** A typed document (graphql.ts). */
export const run = async <R, V extends Record<string, unknown>>(doc: TadaDocumentNode<R, V>, variables?: V, auth?: { apiKey?: string; token?: string }): Promise<R> =>
  (await request(print(doc), variables ?? {}, auth)) as R;

export const isAdmin = (u: User | undefined) => !!u && (u.roles.includes('admin') || u.scope === 'system');
export const isSystem = (u: User | undefined) => !!u && u.scope === 'system';
