/**
 * The types a resource's service shares with the helpers it delegates to (access, bulk, cascade,
 * events, populate, restore, update, write-checks). The helpers take a {@link ResourceCore}, the
 * part of `ResourceService` they use, so they never import service.ts and no import cycle forms.
 */
import type { Model, Types } from 'mongoose';
import type { Config } from '../../config/index.ts';
import type { AppError } from '../../core/errors.ts';
import type { EventLog } from '../events/index.ts';
import type { OutboxEntry, OutboxSource } from '../events/public/outbox.ts';
import type { Page } from '../../lib/page.ts';
import type { Actor } from '../../core/context.ts';
import type { Filter } from '../../core/access.ts';
import type { Tenancy } from '../../core/tenancy.ts';
import type { Doc, DocumentEventBase, HookBus } from '../../core/hooks.ts';
import type { QueryLimits, ResourceQueryInfo } from './query.ts';
import type { ResourceDefinition } from './define.ts';
import type { ResourceEventVerb } from './event-verbs.ts';
import type { FileFieldRule } from './fields.ts';
import type { PlainWriter } from './plain-write.ts';
import type { DraftOptions } from './drafts/fields.ts';
import type { AccessService } from '../access/index.ts';

/** Options of a write's outbox entry (events.ts `outboxFor`). */
export interface OutboxOptions {
  bulk?: boolean;
  replace?: boolean;
  /** The document's tenant (a create's; otherwise taken from `old`). */
  tenantId?: string | null;
  /** The version an update restores (versions: `POST …/versions/{n}/restore`). */
  restoredVersion?: number;
  /**
   * The fields of the view an update sets or removes (`version` among them), when the view before
   * and after differ in nothing else: the entry keeps their values before (`before`) instead of the
   * whole previous document, and so stays in the document once relayed.
   */
  changed?: readonly string[];
}

/**
 * What the plugin holding files checks when a document references one through a `file` field
 * (`resources.setFileChecker`). The reference check has already found the file in the actor's
 * scope and the document's tenant.
 */
export interface FileReferenceChecker {
  /** Null when the file may be written into a field declared with `rule`; else the issue (`msg`, `type`). */
  check(tenantId: string | null, id: Types.ObjectId, rule: FileFieldRule): Promise<{ msg: string; type: string } | null>;
}

export type ResourceModel = Model<Doc>;

/** Offset-mode list answer. The same numbers go out as `X-Total-Count`, `X-Page`, `X-Per-Page`, `X-Total-Pages`. */
export type OffsetPage = Page<Doc> & { mode: 'offset' };

/** Cursor-mode list answer: the items and the cursors to the neighbouring pages. */
export interface CursorPage {
  mode: 'cursor';
  items: Doc[];
  cursors: { next: string | null; prev: string | null; has_next: boolean; has_prev: boolean };
}

/** What a service needs from its siblings (cascade, populate, reference checks). */
export interface ResourceLookup {
  get(name: string): ResourceCore | undefined;
  referencing(name: string): { service: ResourceCore; field: string; on_delete: 'deny' | 'cascade' | 'set_null' }[];
}

export interface ServiceDeps {
  hooks: HookBus;
  config: Config;
  tenancy: Tenancy;
  /** The event log: every write stages its event into the document's outbox (docs/events.md). */
  events: EventLog;
  lookup: ResourceLookup;
  limits: Partial<QueryLimits>;
  /** The access plugin's rules, when it is enabled (asked at each call: it is set up after this plugin). */
  access?: () => AccessService | undefined;
  /** The checks of `file` fields, from the plugin holding files (set after this plugin). */
  files?: () => FileReferenceChecker | undefined;
  /** What a drafts resource adds to every read and write filter for the caller (drafts/service.ts `draftsReadRows`). */
  drafts?: (svc: ResourceCore, actor: Actor) => Promise<Filter | null>;
}

/** Options of list and get-one reads. */
export interface ReadOptions {
  /**
   * The actor needs each document's ETag (GraphQL's `etag` field): `version` stays in a `fields`
   * projection that leaves it out. @default false
   */
  etags?: boolean;
}

/** What the helpers use of a resource's service: `ResourceService` implements it. */
export interface ResourceCore {
  readonly def: ResourceDefinition;
  readonly model: ResourceModel;
  readonly deps: ServiceDeps;
  readonly queryInfo: ResourceQueryInfo;
  readonly fieldByPath: Map<string, ResourceDefinition['fields'][number]>;
  readonly clientPaths: string[];
  readonly source: OutboxSource;
  readonly plain: PlainWriter;
  readonly viewExpression: Doc;
  readonly hidesPaths: boolean;
  shownKeys(keys: Iterable<string>): string[];
  scope(actor: Actor, opts?: { includeDeleted?: boolean }): Filter;
  checkIncludeDeleted(actor: Actor, includeDeleted: boolean): void;
  view(doc: Doc): Doc;
  draftRows(actor: Actor): Promise<Filter | null>;
  outboxFor(verb: ResourceEventVerb, actor: Actor | null, old: Doc | null, opts?: OutboxOptions): OutboxEntry[];
  committed(doc: Doc): Promise<void>;
  create(actor: Actor, body: unknown, opts?: { bulk?: boolean; loc?: (string | number)[]; draft?: DraftOptions | null }): Promise<Doc>;
  remove(actor: Actor, id: string, ifMatch: string | null | undefined, opts?: { bulk?: boolean }): Promise<Doc>;
  oid(id: string): Types.ObjectId;
  needsCasting(filter: Filter): boolean;
  projection(fields: string[] | null): Record<string, 0 | 1>;
  findOwned(id: string, scope: Filter, plain?: boolean): Promise<Doc>;
  lostRace(id: string, scope: Filter): Promise<AppError>;
  softDelete(old: Doc, scope: Filter, actor: Actor | null, bulk?: boolean): Promise<Doc | null>;
  childFilter(field: string, parent: Doc): Filter;
  checkReferrers(old: Doc): Promise<void>;
  cascadeFrom(actor: Actor, old: Doc): Promise<void>;
  actorId(actor: Actor | null): Types.ObjectId | null;
  event(actor: Actor | null, tenantId: string | null, bulk: boolean): DocumentEventBase;
}
