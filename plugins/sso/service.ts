/**
 * Signing in through a tenant's OpenID provider: the redirect with PKCE, `state` and `nonce`, and
 * the callback that verifies the ID token with openid-client, finds or creates the user, maps the
 * provider's groups to roles, and answers a bearer token bound to the sign-in's link. Every
 * attempt, refused or not, is a record with its event and audit entry. No Koa or GraphQL here.
 */
import { createHash, randomBytes } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { Types } from 'mongoose';
import * as oidc from 'openid-client';
import { AppError, ConflictError, ErrorCode, NotFoundError } from '../../core/errors.ts';
import { systemActor, type Actor, type CredentialRef } from '../../core/context.ts';
import type { Doc } from '../../core/hooks.ts';
import { OUTBOX_FIELD, type OutboxSource } from '../events/public/outbox.ts';
import type { EventLog } from '../events/index.ts';
import type { Logger } from '../../core/logger.ts';
import type { Permissions } from '../../core/permissions.ts';
import type { ProviderRecord, SsoModels } from './model.ts';
import type { ProviderService } from './providers.ts';
import type { TokenResponse } from './schemas.ts';

/** The credential kind of tokens issued by an SSO sign-in: `sso:<link id>`. */
export const SSO_CREDENTIAL_KIND = 'sso';

/** What sign-in needs of identity (the core identity service). */
export interface IdentityPort {
  usersByEmail(email: string): Promise<Actor[]>;
  userForLogin(id: string, tenantId: string, email: string): Promise<Actor | null>;
  createUser(actor: Actor, input: { email: string; name: string; tenant_id: string; roles?: string[] }): Promise<{ id: string }>;
  updateUser(actor: Actor, id: string, input: { roles?: string[]; is_active?: boolean }): Promise<unknown>;
  issueToken(actor: Actor, credential: CredentialRef): Promise<TokenResponse>;
  invalidateUser(userId: string): void;
}

/** Why a sign-in was refused: each a stable `details.reason`. */
export type RefusalReason =
  | 'state_unknown' | 'provider_error' | 'id_token_invalid' | 'nonce_mismatch' | 'token_expired' | 'audience_mismatch' | 'issuer_mismatch'
  | 'email_missing' | 'email_unverified' | 'domain_not_allowed' | 'not_granted' | 'no_account' | 'user_disabled' | 'provider_unreachable';

const REFUSAL_STATUS: Record<RefusalReason, number> = {
  state_unknown: 401, provider_error: 401, id_token_invalid: 401, nonce_mismatch: 401, token_expired: 401, audience_mismatch: 401, issuer_mismatch: 401,
  email_missing: 403, email_unverified: 403, domain_not_allowed: 403, not_granted: 403, no_account: 403, user_disabled: 403, provider_unreachable: 503,
};

const REFUSAL_MESSAGE: Record<RefusalReason, string> = {
  state_unknown: 'This sign-in link was already used or has expired: start the sign-in again',
  provider_error: 'The identity provider refused the sign-in',
  id_token_invalid: 'The identity provider\'s answer could not be verified',
  nonce_mismatch: 'The ID token does not belong to this sign-in (nonce)',
  token_expired: 'The ID token has expired',
  audience_mismatch: 'The ID token was issued for another application',
  issuer_mismatch: 'The ID token was issued by another provider',
  email_missing: 'The identity provider gave no e-mail address',
  email_unverified: 'The identity provider has not verified this e-mail address',
  domain_not_allowed: 'E-mail addresses of this domain may not sign in here',
  not_granted: 'The identity provider\'s groups grant no role here',
  no_account: 'No account for this e-mail address in this tenant',
  user_disabled: 'This account is disabled',
  provider_unreachable: 'The identity provider could not be reached: try again later',
};

/** A refused sign-in: 401 for what fails verification, 403 for a verified person not let in. */
export class SignInRefusedError extends AppError {
  constructor(readonly reason: RefusalReason) {
    const status = REFUSAL_STATUS[reason];
    super(status, status === 401 ? ErrorCode.AUTH_REQUIRED : status === 403 ? ErrorCode.ACCESS_DENIED : ErrorCode.SERVICE_UNAVAILABLE, REFUSAL_MESSAGE[reason], { reason });
  }
}

export interface SignInDeps {
  models: SsoModels;
  providers: ProviderService;
  identity: IdentityPort;
  events: EventLog;
  log: Logger;
  /** Lets openid-client talk to an `http://` issuer (development only, checked when the provider is saved). */
  development: boolean;
  /** Where the console lives; a console sign-in ends there with `#sso_code=`. */
  consolePath: string;
}

export type CallbackResult = { kind: 'token'; token: TokenResponse } | { kind: 'console'; location: string };

const random = () => randomBytes(32).toString('base64url');
const hash = (s: string) => createHash('sha256').update(s).digest('base64url');

/** Maps an openid-client verification failure to its reason. */
function reasonOf(err: unknown): RefusalReason {
  // openid-client names the failed check in the error's cause (oauth4webapi's OperationProcessingError).
  const cause = (err as { cause?: { message?: string; claim?: string } })?.cause;
  const text = `${(err as Error)?.message ?? ''} ${cause?.message ?? ''} ${cause?.claim ?? ''}`;
  if (/nonce/i.test(text)) return 'nonce_mismatch';
  if (/"exp"|expired|timestamp/i.test(text)) return 'token_expired';
  if (/"aud"|audience|azp/i.test(text)) return 'audience_mismatch';
  if (/"iss"|issuer/i.test(text)) return 'issuer_mismatch';
  if ((err as { code?: string })?.code === 'OAUTH_RESPONSE_BODY_ERROR' || /invalid_grant/.test(text)) return 'provider_error';
  return 'id_token_invalid';
}

/**
 * Who may call each sign-in operation: the one declaration its REST route and GraphQL field both
 * read. Signing in is public by nature: the provider's ID token or the one-time code is the proof.
 */
export const SIGN_IN_PERMISSIONS = { start: 'public', callback: 'public', exchange: 'public' } as const satisfies Permissions;

export class SignInService {
  readonly source: OutboxSource;
  /** Discovery documents, per provider revision: a sign-in does not fetch the issuer's metadata again. */
  private readonly configs = new LRUCache<string, Promise<oidc.Configuration>>({ max: 500, ttl: 3_600_000 });

  constructor(private readonly deps: SignInDeps) {
    this.source = { name: 'sso_sign_ins', model: deps.models.SignIn, view: (d) => signInView(d) };
  }

  /**
   * The provider's authorization URL for a new sign-in, with PKCE (S256), `state` and `nonce`
   * kept server-side for 10 minutes.
   * @throws NotFoundError for an unknown tenant or provider
   */
  async start(tenantId: string, slug: string, returnTo: 'token' | 'console', origin: string): Promise<string> {
    const provider = await this.deps.providers.bySlug(tenantId, slug);
    if (!provider) throw new NotFoundError('sso_provider', slug);
    const config = await this.configOf(provider);
    const state = random();
    const nonce = random();
    const verifier = oidc.randomPKCECodeVerifier();
    const redirectUri = `${origin}/auth/sso/${tenantId}/${slug}/callback`;
    await this.deps.models.State.create({ _id: state, tenant_id: provider.tenant_id, provider_id: provider._id, nonce, code_verifier: verifier, redirect_uri: redirectUri, return_to: returnTo, created_at: new Date() });
    return oidc.buildAuthorizationUrl(config, {
      redirect_uri: redirectUri,
      scope: (provider.scopes?.length ? provider.scopes : ['openid', 'email', 'profile']).join(' '),
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
      nonce,
    }).href;
  }

  /**
   * Finishes a sign-in: the state is consumed once (a replay is refused on every replica), the
   * code exchanged and the ID token verified (issuer, audience, signature, expiry, nonce).
   * @throws SignInRefusedError with its reason; nothing but the attempt's record is written
   */
  async callback(tenantId: string, slug: string, url: URL, ip: string | null): Promise<CallbackResult> {
    const stateId = url.searchParams.get('state') ?? '';
    const state = await this.deps.models.State.findOneAndDelete({ _id: stateId, tenant_id: Types.ObjectId.isValid(tenantId) ? tenantId : null }).lean();
    const provider = state ? await this.deps.models.Provider.findOne({ _id: state.provider_id, is_deleted: false }).lean<ProviderRecord>() : null;
    const attempt: Attempt = { tenantId, provider: slug, providerId: provider?._id ?? null, ip };
    if (!state || !provider || provider.name !== slug) return this.refuse(attempt, 'state_unknown');
    if (url.searchParams.get('error')) return this.refuse(attempt, 'provider_error');

    let claims: Record<string, unknown>;
    try {
      const config = await this.configOf(provider);
      const callbackUrl = new URL(state.redirect_uri);
      callbackUrl.search = url.search;
      const tokens = await oidc.authorizationCodeGrant(config, callbackUrl, { pkceCodeVerifier: state.code_verifier, expectedState: stateId, expectedNonce: state.nonce, idTokenExpected: true });
      claims = { ...(tokens.claims() ?? {}) };
      if (typeof claims.email !== 'string' && tokens.access_token) claims = { ...(await oidc.fetchUserInfo(config, tokens.access_token, String(claims.sub))), ...claims };
    } catch (err) {
      if (err instanceof SignInRefusedError) throw err;
      this.deps.log.info({ err, provider: provider.name, tenant_id: tenantId }, 'SSO sign-in: the provider\'s answer did not verify');
      return this.refuse(attempt, reasonOf(err));
    }
    attempt.subject = String(claims.sub);
    const email = typeof claims.email === 'string' ? claims.email.trim().toLowerCase() : '';
    attempt.email = email || null;
    if (!email) return this.refuse(attempt, 'email_missing');
    if (!emailVerified(claims)) return this.refuse(attempt, 'email_unverified');
    const domain = email.slice(email.lastIndexOf('@') + 1);
    if (provider.allowed_domains?.length && !provider.allowed_domains.includes(domain)) return this.refuse(attempt, 'domain_not_allowed');

    const mapping = (provider.role_mapping ?? {}) as Record<string, string[]>;
    const mapped = Object.keys(mapping).length ? rolesOf(mapping, claims[provider.groups_claim ?? 'groups']) : null;
    const tid = String(provider.tenant_id);
    const sys = systemActor(tid);
    const link = await this.deps.models.Link.findOne({ tenant_id: provider.tenant_id, provider_id: provider._id, subject: attempt.subject }).lean();
    let user = link ? await this.deps.identity.userForLogin(String(link.user_id), tid, link.email) : null;
    if (!user) user = (await this.deps.identity.usersByEmail(email)).find((u) => u.tenant_id === tid) ?? null;

    if (mapped && !mapped.length) {
      // The provider no longer grants them anything here: cut the account off now, not only this sign-in.
      if (user) {
        await this.deps.identity.updateUser(sys, user.id, { is_active: false });
        await this.deps.models.Link.updateOne({ tenant_id: provider.tenant_id, provider_id: provider._id, subject: attempt.subject }, { $set: { disabled_by_sso: true } });
        attempt.userId = user.id;
      }
      return this.refuse(attempt, 'not_granted');
    }
    if (!user && link?.disabled_by_sso) {
      // Granted again: only an account SSO itself turned off is turned back on.
      try {
        await this.deps.identity.updateUser(sys, String(link.user_id), { is_active: true });
        user = await this.deps.identity.userForLogin(String(link.user_id), tid, link.email);
      } catch (err) {
        if (!(err instanceof NotFoundError)) throw err;
      }
    }
    if (!user) {
      if (!provider.jit) return this.refuse(attempt, link ? 'user_disabled' : 'no_account');
      try {
        const created = await this.deps.identity.createUser(sys, { email, name: nameOf(claims, email), tenant_id: tid, roles: mapped ?? ['user'] });
        user = await this.deps.identity.userForLogin(created.id, tid, email);
      } catch (err) {
        // An account with this address exists but is not active: never a second one beside it.
        if (err instanceof ConflictError) return this.refuse(attempt, 'user_disabled');
        throw err;
      }
      if (!user) return this.refuse(attempt, 'user_disabled');
    } else if (mapped && !sameSet(mapped, user.roles)) {
      await this.deps.identity.updateUser(sys, user.id, { roles: mapped });
      this.deps.identity.invalidateUser(user.id);
      user = { ...user, roles: mapped };
    }
    attempt.userId = user.id;
    const linked = await this.deps.models.Link.findOneAndUpdate(
      { tenant_id: provider.tenant_id, provider_id: provider._id, subject: attempt.subject },
      { $set: { tenant_id: provider.tenant_id, user_id: new Types.ObjectId(user.id), email, disabled_by_sso: false, last_sign_in_at: new Date() } },
      { upsert: true, returnDocument: 'after', projection: { _id: 1 } },
    ).lean();
    await this.record(attempt, 'succeeded', null);
    if (state.return_to === 'console') {
      const code = random();
      await this.deps.models.Code.create({ _id: hash(code), link_id: linked!._id, user_id: new Types.ObjectId(user.id), created_at: new Date() });
      return { kind: 'console', location: `${this.deps.consolePath}#sso_code=${code}` };
    }
    return { kind: 'token', token: await this.deps.identity.issueToken(user, { kind: SSO_CREDENTIAL_KIND, id: String(linked!._id) }) };
  }

  /**
   * The console's hand-over: a code from a console sign-in, once, within a minute, for a token.
   * @throws AuthRequiredError (401) for an unknown, used or expired code
   */
  async exchange(code: string): Promise<TokenResponse> {
    const row = await this.deps.models.Code.findOneAndDelete({ _id: hash(code), created_at: { $gt: new Date(Date.now() - 60_000) } }).lean();
    const link = row ? await this.deps.models.Link.findOne({ _id: row.link_id }).lean() : null;
    const user = link ? await this.deps.identity.userForLogin(String(link.user_id), String(link.tenant_id), link.email) : null;
    if (!row || !link || !user) throw new SignInRefusedError('state_unknown');
    return this.deps.identity.issueToken(user, { kind: SSO_CREDENTIAL_KIND, id: String(link._id) });
  }

  /** Whether an SSO token's link still stands: its provider not removed. */
  async resolveCredential(linkId: string): Promise<{ user_id: string } | null> {
    if (!Types.ObjectId.isValid(linkId)) return null;
    const link = await this.deps.models.Link.findOne({ _id: linkId }).lean();
    if (!link) return null;
    const live = await this.deps.models.Provider.exists({ _id: link.provider_id, is_deleted: false });
    return live ? { user_id: String(link.user_id) } : null;
  }

  private configOf(p: ProviderRecord): Promise<oidc.Configuration> {
    const key = `${String(p._id)}:${p.version ?? 1}`;
    let found = this.configs.get(key);
    if (!found) {
      const options = this.deps.development && p.issuer.startsWith('http://') ? { execute: [oidc.allowInsecureRequests] } : undefined;
      found = oidc.discovery(new URL(p.issuer), p.client_id, this.deps.providers.secretOf(p), undefined, { ...options, timeout: 10 }).catch((err: unknown) => {
        this.configs.delete(key);
        this.deps.log.warn({ err, issuer: p.issuer }, 'SSO: the provider\'s discovery document could not be read');
        throw new SignInRefusedError('provider_unreachable');
      });
      this.configs.set(key, found);
    }
    return found;
  }

  private async refuse(attempt: Attempt, reason: RefusalReason): Promise<never> {
    await this.record(attempt, 'refused', reason);
    throw new SignInRefusedError(reason);
  }

  /** The attempt's record, carrying its event and audit entry in its outbox. */
  private async record(a: Attempt, outcome: 'succeeded' | 'refused', reason: RefusalReason | null): Promise<void> {
    if (!Types.ObjectId.isValid(a.tenantId)) return;
    const doc = {
      _id: new Types.ObjectId(), tenant_id: new Types.ObjectId(a.tenantId), provider_id: a.providerId, provider: a.provider, outcome, reason,
      email: a.email ?? null, subject: a.subject ?? null, user_id: a.userId ? new Types.ObjectId(a.userId) : null, ip: a.ip, created_at: new Date(),
    };
    const actor: Actor = a.userId ? { ...systemActor(a.tenantId), id: a.userId, name: a.email ?? 'sso', scope: null, is_system_user: false } : systemActor(a.tenantId);
    const entry = this.deps.events.stage(outcome === 'succeeded' ? 'sso.signed_in' : 'sso.sign_in_refused', {
      actor, tenant_id: a.tenantId,
      meta: { resource: 'sso_sign_ins', ip: a.ip, audit: { operation: 'insert', resource: 'sso_sign_ins', actor_name: a.email ?? null, ip: a.ip } },
    });
    const record = { ...doc, [OUTBOX_FIELD]: this.deps.events.outbox.insert({ ...entry, data: signInView(doc as unknown as Doc) } as never) };
    await this.deps.models.SignIn.collection.insertOne(record as never);
    await this.deps.events.committed(this.source, record as unknown as Doc);
  }
}

interface Attempt {
  tenantId: string;
  provider: string;
  providerId: Types.ObjectId | null;
  ip: string | null;
  subject?: string;
  email?: string | null;
  userId?: string;
}

const signInView = (d: Doc): Doc => ({
  id: String(d._id), provider: d.provider, outcome: d.outcome, reason: d.reason ?? null, email: d.email ?? null,
  user_id: d.user_id ? String(d.user_id) : null, created_at: d.created_at,
});

function rolesOf(mapping: Record<string, string[]>, groups: unknown): string[] {
  const held = Array.isArray(groups) ? groups.map(String) : typeof groups === 'string' ? [groups] : [];
  return [...new Set(held.flatMap((g) => mapping[g] ?? []))].sort();
}

const sameSet = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((x) => b.includes(x));

function nameOf(claims: Record<string, unknown>, email: string): string {
  const name = typeof claims.name === 'string' && claims.name.trim() ? claims.name.trim() : [claims.given_name, claims.family_name].filter((p) => typeof p === 'string' && p).join(' ');
  return (name || email.slice(0, email.indexOf('@'))).slice(0, 200);
}

/**
 * Whether the provider vouches for the e-mail: `email_verified: true`, or, from Microsoft Entra ID
 * (whose tokens carry no `email_verified`), the optional claim `xms_edov` (the e-mail's domain owner
 * is verified) set true. Anything else is unverified.
 */
function emailVerified(claims: Record<string, unknown>): boolean {
  if (claims.email_verified === true) return true;
  const edov = claims.xms_edov;
  return claims.email_verified === undefined && (edov === true || edov === 1 || edov === '1' || edov === 'true');
}
