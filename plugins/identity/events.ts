/**
 * Identity's events: tenants, users and API keys changed through the admin API are events on the
 * log, each staged into the changed document's outbox by the write that makes the change
 * (docs/events.md, docs/auth.md "Events"). Every entry carries its object (`data`) and, for
 * updates, the object before (`previous`), both computed by the database inside the write, so two
 * quick changes keep their own objects and no read is added. No Koa or GraphQL here.
 */
import type { Types } from 'mongoose';
import { z } from 'zod';
import { isSystemActor, requestOf, type Actor } from '../../core/context.ts';
import type { Doc } from '../../core/hooks.ts';
import type { EventTypeDefinition } from '../events/public/contributions.ts';
import type { AuditedChange, OutboxEntry, OutboxSource } from '../events/public/outbox.ts';
import type { EventLog } from '../events/index.ts';
import { OUTBOX_FIELD } from '../events/public/outbox.ts';
import type { IdentityModels } from './model.ts';
import { apiKeyView, tenantView, userView } from './schemas.ts';

/** Resource names of identity's audit entries (the collections). */
export const IDENTITY_COLLECTIONS = { tenants: 'tenants', users: 'users', api_keys: 'api_keys' } as const;

/** The admin views without their OpenAPI component id: the catalogue inlines each type's schema. */
const inline = <S extends z.ZodRawShape>(schema: z.ZodObject<S>) => z.object(schema.shape);
const userData = inline(userView);

/** The event types identity stores, for the catalogue (`GET /events/types`). */
export const identityEventTypes: EventTypeDefinition[] = [
  { name: 'tenant.created', description: 'A tenant was created; data is the tenant', data: inline(tenantView) },
  { name: 'user.created', description: 'A user was created (a system administrator too); data is the user as GET /admin/users shows it', data: userData },
  { name: 'user.updated', description: 'A user was changed (name, roles, features, attributes, is_active); data is the user after the change', data: userData },
  { name: 'user.disabled', description: 'A user was cut off (is_active became false): its keys and tokens stop working; stored with the user.updated of the same change', data: userData },
  { name: 'user.deleted', description: 'A user was soft-deleted: every key of it revoked by the same change; data is the user after the change', data: userData },
  { name: 'api_key.created', description: 'An API key was created; data is the key without its secret (never the key or its hash)', data: inline(apiKeyView) },
  { name: 'api_key.revoked', description: 'An API key was revoked; data is the key without its secret', data: inline(apiKeyView) },
];

/** The document of a user, an API key or a tenant as the admin API shows it: an aggregation expression (used inside writes). */
const VIEW_EXPRESSION: Record<keyof typeof IDENTITY_COLLECTIONS, Doc> = {
  tenants: { id: { $toString: '$_id' }, name: '$name', is_system: { $eq: ['$is_system', true] }, created_at: { $ifNull: ['$created_at', null] } },
  users: {
    id: { $toString: '$_id' }, email: '$email', name: '$name', tenant_id: { $toString: '$tenant_id' }, roles: { $ifNull: ['$roles', []] },
    scope: { $cond: [{ $eq: ['$scope', 'system'] }, 'system', null] }, is_system_user: { $eq: ['$is_system_user', true] },
    features: { $ifNull: ['$features', []] }, attributes: { $ifNull: ['$attributes', {}] }, is_active: { $ne: ['$is_active', false] },
    created_at: { $ifNull: ['$created_at', null] },
  },
  api_keys: {
    id: { $toString: '$_id' }, name: '$name', user_id: { $toString: '$user_id' }, tenant_id: { $toString: '$tenant_id' }, prefix: '$prefix',
    revoked_at: { $ifNull: ['$revoked_at', null] }, last_used_at: { $ifNull: ['$last_used_at', null] }, created_at: { $ifNull: ['$created_at', null] },
  },
};

/** What an identity change says about itself. */
export interface IdentityChange {
  type: string;
  actor: Actor;
  tenantId: Types.ObjectId | string | null;
  /** The audit entry the event carries; absent for an event of a change another event of the same write already audits. */
  audit?: AuditedChange['operation'];
}

const PREVIOUS = '__previous';
/** An event's tenant: the changed document's (a tenant's own id), read inside the write. */
const TENANT_OF: Record<keyof typeof IDENTITY_COLLECTIONS, string> = { tenants: '$_id', users: '$tenant_id', api_keys: '$tenant_id' };

/**
 * Stages identity's events and builds the writes that carry them. One instance per app; the event
 * log is reached lazily (the core events plugin is set up after identity).
 */
export class IdentityEvents {
  readonly sources: Record<keyof typeof IDENTITY_COLLECTIONS, OutboxSource>;

  constructor(models: IdentityModels, private readonly events: () => EventLog) {
    const viewOf = (d: Doc) => d as Doc; // every entry carries its object: the relay never builds one
    this.sources = {
      tenants: { name: IDENTITY_COLLECTIONS.tenants, model: models.Tenant, view: viewOf, tenantScoped: false },
      users: { name: IDENTITY_COLLECTIONS.users, model: models.User, view: viewOf },
      api_keys: { name: IDENTITY_COLLECTIONS.api_keys, model: models.ApiKey, view: viewOf },
    };
  }

  /** The entry of one change (without its object yet). */
  stage(collection: keyof typeof IDENTITY_COLLECTIONS, c: IdentityChange): OutboxEntry {
    const req = requestOf(c.actor);
    const audit: AuditedChange | undefined = c.audit && {
      operation: c.audit, resource: IDENTITY_COLLECTIONS[collection],
      actor_name: isSystemActor(c.actor) ? null : c.actor.name ?? null, ip: req?.ip ?? null,
    };
    return this.events().stage(c.type, { actor: c.actor, tenant_id: c.tenantId, meta: { resource: IDENTITY_COLLECTIONS[collection], ip: req?.ip ?? null, ...(audit ? { audit } : {}) } });
  }

  /** The `_outbox` of a new document whose object (`view`) is known before the insert. */
  forInsert(entries: OutboxEntry[], view: Doc): OutboxEntry[] {
    return entries.map((e) => ({ ...e, data: view }));
  }

  /**
   * An update pipeline that applies `set` and appends `entries` to the document's outbox, each with
   * the object before (`previous`) and after (`data`) and the document's tenant as the database saw
   * them in this write.
   */
  pipeline(collection: keyof typeof IDENTITY_COLLECTIONS, set: Doc, entries: OutboxEntry[]): Doc[] {
    const view = VIEW_EXPRESSION[collection];
    const literal = Object.fromEntries(Object.entries(set).map(([k, v]) => [k, { $literal: v }]));
    return [
      { $set: { [PREVIOUS]: view } },
      { $set: literal },
      {
        $set: {
          [OUTBOX_FIELD]: {
            $concatArrays: [
              { $ifNull: [`$${OUTBOX_FIELD}`, []] },
              entries.map((e) => ({ $mergeObjects: [{ $literal: e }, { tenant_id: TENANT_OF[collection], previous: `$${PREVIOUS}`, data: view }] })),
            ],
          },
        },
      },
      { $unset: PREVIOUS },
    ];
  }

  /** The write succeeded: hand the written document to the relay. */
  committed(collection: keyof typeof IDENTITY_COLLECTIONS, doc: Doc): Promise<void> {
    return this.events().committed(this.sources[collection], doc);
  }
}
