import { AsyncResource } from 'node:async_hooks';
import { AppError, AuthRequiredError, BadRequestError } from '../../../core/errors.ts';
import { hasSystemScope, type Actor } from '../../../core/context.ts';
import type { Logger } from '../../../core/logger.ts';
import type { PresentedCredential } from '../../../core/transport.ts';

/** The identity service's two ways of resolving a credential (cached for `AUTH_CACHE_TTL_MS`). */
export interface CredentialCheck {
  authenticateApiKey(key: string): Promise<Actor>;
  authenticateToken(token: string): Promise<Actor>;
}

/**
 * Resolves a presented credential to its actor, as the HTTP middleware does (`X-Tenant-Id` for
 * system administrators). Null when nothing was presented.
 * @throws AuthRequiredError for a rejected credential; BadRequestError for a malformed tenant id
 */
export async function authenticatePresented(identity: CredentialCheck, p: PresentedCredential): Promise<Actor | null> {
  let actor: Actor;
  if (p.apiKey) actor = await identity.authenticateApiKey(p.apiKey);
  else if (p.token) actor = await identity.authenticateToken(p.token);
  else return null;
  if (p.tenantId && hasSystemScope(actor)) {
    if (!/^[0-9a-fA-F]{24}$/.test(p.tenantId)) throw new BadRequestError('X-Tenant-Id must be an object id');
    actor = { ...actor, acting_tenant_id: p.tenantId };
  }
  return actor;
}

/** The credential of a request's headers (`X-API-Key`, `Authorization: Bearer`, `X-Tenant-Id`). */
export function presentedOf(header: (name: string) => string | undefined): PresentedCredential {
  const bearer = /^Bearer\s+(\S+)$/i.exec(header('authorization') ?? '')?.[1];
  const apiKey = header('x-api-key');
  const tenantId = header('x-tenant-id');
  return { ...(apiKey ? { apiKey } : bearer ? { token: bearer } : {}), ...(tenantId ? { tenantId } : {}) };
}

/**
 * One open stream's credential: its current actor (refreshed when roles or features change), and
 * a signal that aborts with the reason when the credential stops being valid.
 */
export class LiveSession {
  private readonly controller = new AbortController();
  private expiry: NodeJS.Timeout | null = null;
  /** The credential as a key: sessions with the same one are re-checked together. */
  readonly credentialKey: string;

  constructor(
    public actor: Actor,
    readonly presented: PresentedCredential,
    private readonly onClose: (s: LiveSession) => void,
  ) {
    this.credentialKey = JSON.stringify(presented);
    const exp = actor.credential?.exp;
    if (exp !== undefined) {
      // setTimeout's longest delay is about 24.8 days; a longer-lived token is re-checked anyway.
      const ms = Math.min(exp * 1000 - Date.now(), 2 ** 31 - 1);
      this.expiry = setTimeout(() => this.end(new AuthRequiredError('Token expired')), Math.max(0, ms));
      this.expiry.unref();
    }
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Why the session ended (an `AppError`), once it has. */
  get reason(): AppError | undefined {
    return this.signal.aborted ? (this.signal.reason as AppError) : undefined;
  }

  end(reason: AppError = new AppError(499, 'CLOSED', 'Stream closed')): void {
    if (this.expiry) clearTimeout(this.expiry);
    this.expiry = null;
    if (!this.signal.aborted) this.controller.abort(reason);
    this.onClose(this);
  }
}

/**
 * Every open session of this process, re-authenticated together every `intervalMs` through the
 * identity service: one check per distinct credential (sessions sharing a key share it), answered
 * from the credential cache until `AUTH_CACHE_TTL_MS` passes. A revoked key, a disabled user or a
 * token whose root credential is gone ends its sessions within `AUTH_CACHE_TTL_MS` plus one interval.
 */
export class SessionRegistry {
  private readonly sessions = new Set<LiveSession>();
  private timer: NodeJS.Timeout | null = null;
  private checking = false;
  /** The re-checks' async context: the registry's own, not that of the request that opened the first session. */
  private readonly scope = new AsyncResource('realtime.sessions');

  constructor(
    private readonly identity: CredentialCheck,
    private readonly intervalMs: number,
    private readonly log: Logger,
  ) {}

  open(actor: Actor, presented: PresentedCredential): LiveSession {
    const session = new LiveSession(actor, presented, (s) => this.sessions.delete(s));
    this.sessions.add(session);
    if (!this.timer) {
      this.timer = this.scope.runInAsyncScope(() => setInterval(() => void this.recheck(), this.intervalMs));
      this.timer.unref();
    }
    return session;
  }

  get size(): number {
    return this.sessions.size;
  }

  /** Ends every session (shutdown). */
  closeAll(reason: AppError): void {
    for (const s of [...this.sessions]) s.end(reason);
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private async recheck(): Promise<void> {
    if (this.checking) return;
    if (!this.sessions.size) {
      if (this.timer) clearInterval(this.timer);
      this.timer = null;
      return;
    }
    this.checking = true;
    try {
      const byCredential = new Map<string, LiveSession[]>();
      for (const s of this.sessions) {
        const group = byCredential.get(s.credentialKey);
        if (group) group.push(s);
        else byCredential.set(s.credentialKey, [s]);
      }
      await Promise.all(
        [...byCredential.values()].map(async (group) => {
          try {
            const actor = await authenticatePresented(this.identity, group[0]!.presented);
            if (!actor) throw new AuthRequiredError();
            for (const s of group) s.actor = { ...actor, ...(s.actor.credential ? { credential: s.actor.credential } : {}) };
          } catch (err) {
            if (err instanceof AppError && err.status === 401) for (const s of group) s.end(err);
            else this.log.warn({ err }, 'realtime credential check failed; streams stay open');
          }
        }),
      );
    } finally {
      this.checking = false;
    }
  }
}
