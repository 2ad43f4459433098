/**
 * History, diff and restore of a versioned resource's documents (docs/versions.md), on the records
 * of store.ts. Every read first finds the current document through the resource's own read path
 * (tenant scope, guards, the caller's access rules; soft-deleted documents for administrators), so
 * history is never wider than the document, and masks what it returns with the caller's current
 * read rules. A restore is a PUT of the old values through the normal update path. No Koa or GraphQL here.
 */
import type { Types } from 'mongoose';
import { isAdmin, type Actor } from '../../../core/context.ts';
import { ConflictError, NotFoundError } from '../../../core/errors.ts';
import { parseIfMatch } from '../../../lib/etag.ts';
import type { Doc } from '../../../core/hooks.ts';
import { maskWritten, readAccess, type ReadAccess } from '../access.ts';
import type { ResourceService } from '../service.ts';
import { updateDocument } from '../update.ts';
import type { TenantTerm, VersionHead, VersionRecord, VersionStore } from './store.ts';

/** A version as a history page lists it. */
export interface VersionEntry {
  version: number;
  operation: VersionRecord['operation'];
  created_at: Date;
  actor: string | null;
  request_id: string | null;
  changed_fields: string[];
  restored_from: number | null;
}

/** A page of history, newest first: `next_before` asks for the next (older) page; null at the first version kept. */
export interface VersionPage {
  items: VersionEntry[];
  next_before: number | null;
}

/** One version with the document as it was (masked by the caller's current read rules). */
export interface VersionView extends VersionEntry {
  document: Doc;
}

/** A field-by-field comparison of two versions. */
export interface VersionDiff {
  version: number;
  /** The version compared against; null when `version` is the first one kept. */
  against: number | null;
  changes: { field: string; before: unknown; after: unknown }[];
}

const same = (a: unknown, b: unknown) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);

/** The versions operations of the versioned resources, sharing one store. */
export class Versions {
  constructor(readonly store: VersionStore) {}

  /** The service of a versioned resource; a resource without versions has no history (404). */
  private check(svc: ResourceService): void {
    if (!svc.def.versions) throw new NotFoundError(svc.def.name, undefined, `${svc.def.name} keeps no versions`);
  }

  /**
   * The current document as the caller may see it (404 otherwise), and the tenant term of its
   * versions. Waits for this process's writes still in the relay's batch, so a client reads its own writes.
   */
  private async target(svc: ResourceService, actor: Actor, id: string): Promise<{ docId: Types.ObjectId; scope: TenantTerm; ra: ReadAccess | null; version: number }> {
    this.check(svc);
    const docId = svc.oid(id);
    const [doc] = await Promise.all([svc.get(actor, id, { includeDeleted: isAdmin(actor), fields: ['_id', 'tenant_id', 'version'] }), svc.deps.events.flush()]);
    const scope: TenantTerm = { tenant_id: doc.tenant_id ?? null };
    return { docId, scope, ra: await readAccess(svc, actor), version: doc.version as number };
  }

  /** The names a caller may read among `fields`. */
  private readableNames(ra: ReadAccess | null, fields: string[]): string[] {
    return ra?.readable ? fields.filter((f) => ra.readable!.has(f)) : fields;
  }

  private entry(ra: ReadAccess | null, r: VersionHead): VersionEntry {
    return {
      version: r.version, operation: r.operation, created_at: r.created_at, actor: r.actor, request_id: r.request_id,
      changed_fields: this.readableNames(ra, r.changed_fields), restored_from: r.restored_from ?? null,
    };
  }

  private async record(svc: ResourceService, scope: TenantTerm, docId: Types.ObjectId, id: string, n: number): Promise<VersionRecord> {
    const r = Number.isSafeInteger(n) && n >= 1 ? await this.store.at(scope, svc.def.name, docId, n) : null;
    if (!r) throw new NotFoundError(svc.def.name, id, `${svc.def.name} ${id} has no version ${n}`);
    return r;
  }

  /** A page of the document's history, newest first, without the documents: versions numbered below `before` (default: all). */
  async history(svc: ResourceService, actor: Actor, id: string, q: { limit: number; before?: number | undefined }): Promise<VersionPage> {
    const { docId, scope, ra, version } = await this.target(svc, actor, id);
    const before = Math.min(q.before ?? version + 1, version + 1);
    const { items, more } = await this.store.page(scope, svc.def.name, docId, before, q.limit);
    return { items: items.map((r) => this.entry(ra, r)), next_before: more ? items.at(-1)!.version : null };
  }

  /** Version `n` with the document as it was, showing only the fields the caller may read now. */
  async at(svc: ResourceService, actor: Actor, id: string, n: number): Promise<VersionView> {
    const { docId, scope, ra } = await this.target(svc, actor, id);
    const r = await this.record(svc, scope, docId, id, n);
    return { ...this.entry(ra, r), document: ra ? ra.mask(r.data) : r.data };
  }

  /** Field-by-field changes from version `against` (default: the one before `n`) to `n`, readable fields only. */
  async diff(svc: ResourceService, actor: Actor, id: string, n: number, against?: number): Promise<VersionDiff> {
    const { docId, scope, ra } = await this.target(svc, actor, id);
    const to = await this.record(svc, scope, docId, id, n);
    const from = against !== undefined ? await this.record(svc, scope, docId, id, against) : await this.store.before(scope, svc.def.name, docId, n);
    const a = from ? (ra ? ra.mask(from.data) : from.data) : {};
    const b = ra ? ra.mask(to.data) : to.data;
    const fields = [...new Set([...Object.keys(a), ...Object.keys(b)])].filter((f) => f !== '_id' && f !== 'version' && f !== 'updated_at' && f !== 'updated_by');
    const changes = fields.filter((f) => !same(a[f], b[f])).sort().map((field) => ({ field, before: a[field] ?? null, after: b[field] ?? null }));
    return { version: n, against: from?.version ?? null, changes };
  }

  /**
   * Writes version `n`'s client fields back as a new version: a PUT through the normal update path
   * (If-Match, validation, hooks, access rules, events, audit), whose event records `n`.
   * @throws ConflictError when a unique field's old value is now held by another document
   */
  async restore(svc: ResourceService, actor: Actor, id: string, n: number, ifMatch: string | null | undefined): Promise<Doc> {
    this.check(svc);
    parseIfMatch(ifMatch);
    const docId = svc.oid(id);
    const [doc] = await Promise.all([svc.get(actor, id, { fields: ['_id', 'tenant_id'] }), svc.deps.events.flush()]);
    const r = await this.record(svc, { tenant_id: doc.tenant_id ?? null }, docId, id, n);
    const body = Object.fromEntries(svc.clientPaths.filter((p) => !p.includes('.') && r.data[p] !== undefined).map((p) => [p, r.data[p]]));
    for (const p of uniquePaths(svc)) {
      if (body[p] === undefined || body[p] === null) continue;
      // Within the document's tenant: another tenant's values are not the caller's to learn of.
      if (await svc.model.exists({ ...(svc.def.tenant_scoped ? { tenant_id: doc.tenant_id ?? null } : {}), [p]: body[p], _id: { $ne: docId } })) {
        throw new ConflictError(`Version ${n} cannot be restored: another document holds its ${p}`, { field: p, version: n });
      }
    }
    return maskWritten(svc, actor, await updateDocument(svc, actor, id, ifMatch, body, true, { restoredVersion: n }));
  }
}

/** The client paths declared `unique` in the resource's schema. */
function uniquePaths(svc: ResourceService): string[] {
  return svc.clientPaths.filter((p) => (svc.model.schema.path(p)?.options as { unique?: unknown } | undefined)?.unique);
}
