/**
 * A tenant's SSO providers: configured by its administrators, each change an event on the log with
 * its audit entry, staged into the provider's outbox by the write that makes it. Secrets are
 * sealed before they are stored and never leave this module. No Koa or GraphQL here.
 */
import { lookup } from 'node:dns/promises';
import ipaddr from 'ipaddr.js';
import { Types } from 'mongoose';
import { ConflictError, NotFoundError, ValidationError } from '../../core/errors.ts';
import { isSystemActor, requestOf, writeTenantId, type Actor } from '../../core/context.ts';
import type { Permissions } from '../../core/permissions.ts';
import type { Doc } from '../../core/hooks.ts';
import type { Tenancy } from '../../core/tenancy.ts';
import { OUTBOX_FIELD, type OutboxSource } from '../events/public/outbox.ts';
import type { EventLog } from '../events/index.ts';
import { pageOf, type Page } from '../../lib/page.ts';
import type { ProviderRecord, SsoModels } from './model.ts';
import type { CreateProviderInput, ProviderListQuery, ProviderView, UpdateProviderInput } from './schemas.ts';
import type { SecretBox } from './crypto.ts';

export interface ProviderServiceDeps {
  models: SsoModels;
  events: EventLog;
  tenancy: Tenancy;
  box: SecretBox;
  /** `NODE_ENV === 'development'`: an `http://127.0.0.1` (or localhost) issuer is accepted. */
  development: boolean;
  /** Roles the tenant may grant (built-in or its own): the unknown ones among `roles`. */
  unknownRoles: (tenantId: string, roles: string[]) => Promise<string[]>;
  resolve?: (host: string) => Promise<string[]>;
}

const loopback = (host: string) => host === 'localhost' || host === '127.0.0.1' || host === '[::1]';

export const providerView = (p: ProviderRecord): ProviderView => ({
  id: String(p._id),
  name: p.name,
  issuer: p.issuer,
  client_id: p.client_id,
  allowed_domains: [...(p.allowed_domains ?? [])],
  role_mapping: (p.role_mapping ?? {}) as Record<string, string[]>,
  groups_claim: p.groups_claim ?? 'groups',
  scopes: [...(p.scopes ?? ['openid', 'email', 'profile'])],
  jit: !!p.jit,
  login_url: `/auth/sso/${String(p.tenant_id)}/${p.name}/login`,
  created_at: p.created_at,
  updated_at: p.updated_at,
});

const eventData = (p: ProviderRecord): Doc => {
  const { login_url: _url, ...rest } = providerView(p);
  return rest as unknown as Doc;
};

/**
 * Who may call each provider operation: the one declaration its REST route and GraphQL field both
 * read. Administrators manage their own tenant's providers (the service scopes the data); a
 * tenant's sign-in screen is public.
 */
export const PROVIDER_PERMISSIONS = { list: 'admin', get: 'admin', create: 'admin', update: 'admin', remove: 'admin', publicList: 'public' } as const satisfies Permissions;

export class ProviderService {
  readonly source: OutboxSource;

  constructor(private readonly deps: ProviderServiceDeps) {
    this.source = { name: 'sso_providers', model: deps.models.Provider, view: (d) => eventData(d as unknown as ProviderRecord) };
  }

  /** The actor's tenant's providers, oldest first (permission: {@link PROVIDER_PERMISSIONS}). */
  async list(actor: Actor, q: ProviderListQuery): Promise<Page<ProviderView>> {
    const filter = { ...this.deps.tenancy.filter(actor), is_deleted: false };
    const [rows, total] = await Promise.all([
      this.deps.models.Provider.find(filter).sort({ created_at: 1, _id: 1 }).skip((q.page - 1) * q.per_page).limit(q.per_page).lean<ProviderRecord[]>(),
      this.deps.models.Provider.countDocuments(filter),
    ]);
    return pageOf(rows.map(providerView), total, q);
  }

  /** Permission: {@link PROVIDER_PERMISSIONS}. @throws NotFoundError outside the actor's tenant */
  async get(actor: Actor, id: string): Promise<ProviderView> {
    return providerView(await this.find(actor, id));
  }

  /**
   * Permission: {@link PROVIDER_PERMISSIONS}.
   * @throws ValidationError for an issuer that is not https (outside development), a role the
   *   tenant does not have; ConflictError for a name the tenant already uses
   */
  async create(actor: Actor, input: CreateProviderInput): Promise<ProviderView> {
    const tenantId = writeTenantId(actor);
    await this.checkIssuer(input.issuer);
    await this.checkRoles(tenantId, input.role_mapping);
    const now = new Date();
    const doc = {
      _id: new Types.ObjectId(),
      tenant_id: new Types.ObjectId(tenantId),
      name: input.name ?? new URL(input.issuer).hostname.split('.').filter((p) => p !== 'www')[0]!.replace(/[^a-z0-9-]/g, '-').slice(0, 63),
      issuer: input.issuer,
      client_id: input.client_id,
      client_secret_enc: this.deps.box.seal(input.client_secret),
      allowed_domains: [...new Set(input.allowed_domains ?? [])],
      role_mapping: input.role_mapping ?? {},
      groups_claim: input.groups_claim ?? 'groups',
      scopes: scopesOf(input.scopes),
      jit: input.jit,
      is_deleted: false,
      deleted_at: null,
      version: 1,
      created_at: now,
      updated_at: now,
    };
    const entry = this.stage(actor, tenantId, 'sso_provider.created', 'insert', 1);
    const record = { ...doc, [OUTBOX_FIELD]: this.deps.events.outbox.insert({ ...entry, data: eventData(doc as ProviderRecord) } as never) };
    try {
      await this.deps.models.Provider.collection.insertOne(record as never);
    } catch (err) {
      if ((err as { code?: number }).code === 11000) throw new ConflictError(`This tenant already has a provider named "${doc.name}"`, { field: 'name' });
      throw err;
    }
    await this.deps.events.committed(this.source, record as unknown as Doc);
    return providerView(doc as ProviderRecord);
  }

  /** Changes the given fields; a new `client_secret` replaces the stored one (permission: {@link PROVIDER_PERMISSIONS}). */
  async update(actor: Actor, id: string, input: UpdateProviderInput): Promise<ProviderView> {
    const old = await this.find(actor, id);
    if (input.issuer !== undefined) await this.checkIssuer(input.issuer);
    if (input.role_mapping) await this.checkRoles(String(old.tenant_id), input.role_mapping);
    const set: Doc = { updated_at: new Date() };
    for (const k of ['name', 'issuer', 'client_id', 'role_mapping', 'groups_claim', 'jit'] as const) if (input[k] !== undefined) set[k] = input[k];
    if (input.scopes) set.scopes = scopesOf(input.scopes);
    if (input.allowed_domains) set.allowed_domains = [...new Set(input.allowed_domains)];
    if (input.client_secret !== undefined) set.client_secret_enc = this.deps.box.seal(input.client_secret);
    return providerView(await this.write(actor, old, set, 'sso_provider.updated', 'update'));
  }

  /**
   * Removes the provider: its sign-in URL answers 404, and the tokens its sign-ins issued stop
   * working (permission: {@link PROVIDER_PERMISSIONS}).
   */
  async remove(actor: Actor, id: string): Promise<void> {
    const old = await this.find(actor, id);
    await this.write(actor, old, { is_deleted: true, deleted_at: new Date(), updated_at: new Date() }, 'sso_provider.deleted', 'delete');
  }

  /**
   * A tenant's providers for its sign-in screen: names and sign-in paths only (public: whoever
   * knows the tenant's id may learn which providers it signs in with, as the provider's own
   * sign-in page would show).
   */
  async publicList(tenantId: string): Promise<{ name: string; login_url: string }[]> {
    const rows = await this.deps.models.Provider.find({ tenant_id: tenantId, is_deleted: false }, { name: 1, tenant_id: 1 }).sort({ created_at: 1, _id: 1 }).limit(50).lean<ProviderRecord[]>();
    return rows.map((p) => ({ name: p.name, login_url: `/auth/sso/${String(p.tenant_id)}/${p.name}/login` }));
  }

  /** A live provider of a tenant by its slug (sign-in), or null. */
  async bySlug(tenantId: string, name: string): Promise<ProviderRecord | null> {
    return this.deps.models.Provider.findOne({ tenant_id: tenantId, name, is_deleted: false }).lean<ProviderRecord>();
  }

  /** The provider's client secret, unsealed. */
  secretOf(p: ProviderRecord): string {
    return this.deps.box.open(p.client_secret_enc);
  }

  private async find(actor: Actor, id: string): Promise<ProviderRecord> {
    const doc = Types.ObjectId.isValid(id)
      ? await this.deps.models.Provider.findOne({ _id: id, is_deleted: false, ...this.deps.tenancy.filter(actor) }).lean<ProviderRecord>()
      : null;
    if (!doc) throw new NotFoundError('sso_provider', id);
    return doc;
  }

  private stage(actor: Actor, tenantId: string, type: string, operation: 'insert' | 'update' | 'delete', version: number) {
    const req = requestOf(actor);
    const audit = { operation, resource: 'sso_providers', actor_name: isSystemActor(actor) ? null : actor.name ?? null, ip: req?.ip ?? null };
    return this.deps.events.stage(type, { actor, tenant_id: tenantId, version, meta: { resource: 'sso_providers', ip: req?.ip ?? null, audit } });
  }

  /** A compare-and-set on the version read, carrying the change's event. */
  private async write(actor: Actor, old: ProviderRecord, set: Doc, type: string, operation: 'update' | 'delete'): Promise<ProviderRecord> {
    const version = (old.version ?? 1) + 1;
    const next = { ...old, ...set, version } as ProviderRecord;
    const entry = { ...this.stage(actor, String(old.tenant_id), type, operation, version), data: eventData(next), previous: eventData(old) };
    const outbox = this.deps.events.outbox.update(this.source, old as unknown as Doc, entry as never);
    let doc: ProviderRecord | null;
    try {
      doc = await this.deps.models.Provider.findOneAndUpdate(
        { _id: old._id, version: old.version ?? 1, is_deleted: false },
        { $set: { ...set, version, [OUTBOX_FIELD]: outbox } },
        { returnDocument: 'after' },
      ).lean<ProviderRecord>();
    } catch (err) {
      if ((err as { code?: number }).code === 11000) throw new ConflictError(`This tenant already has a provider named "${String(set.name)}"`, { field: 'name' });
      throw err;
    }
    if (!doc) throw new ConflictError('The provider changed meanwhile: read it again and retry');
    await this.deps.events.committed(this.source, doc as unknown as Doc);
    return doc;
  }

  /**
   * Issuers are https, reachable on the public internet. In development an `http://127.0.0.1` or
   * `localhost` issuer is accepted too (a local provider).
   */
  private async checkIssuer(issuer: string): Promise<void> {
    const url = new URL(issuer);
    const local = loopback(url.hostname);
    if (this.deps.development && local) return;
    const refuse = (msg: string, type: string) => {
      throw new ValidationError([{ loc: ['body', 'issuer'], msg, type }]);
    };
    if (url.protocol !== 'https:') refuse(this.deps.development ? 'must be an https URL (http only for 127.0.0.1 or localhost in development)' : 'must be an https URL', 'https_required');
    const addresses = ipaddr.isValid(url.hostname.replace(/^\[|\]$/g, '')) ? [url.hostname.replace(/^\[|\]$/g, '')] : await (this.deps.resolve ?? defaultResolve)(url.hostname).catch(() => []);
    if (!addresses.length) refuse('must name a host that resolves', 'unresolvable');
    if (addresses.some((a) => ipaddr.process(a).range() !== 'unicast')) refuse('must be an address on the public internet', 'unsafe_url');
  }

  private async checkRoles(tenantId: string, mapping: Record<string, string[]> | undefined): Promise<void> {
    if (!mapping) return;
    const unknown = await this.deps.unknownRoles(tenantId, [...new Set(Object.values(mapping).flat())]);
    if (unknown.length) throw new ValidationError([{ loc: ['body', 'role_mapping'], msg: `unknown roles: ${unknown.join(', ')}`, type: 'unknown_role' }]);
  }
}

/** The scopes asked for: `openid` first, each once. */
const scopesOf = (scopes: string[] | undefined) => [...new Set(['openid', ...(scopes ?? ['email', 'profile'])])];

const defaultResolve = async (host: string) => (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);
