import type { Readable } from 'node:stream';
import { Types, type Model } from 'mongoose';
import { AppError, ConflictError, ErrorCode, type ErrorCodes, EtagMismatchError, EtagRequiredError, NotFoundError, ValidationError } from '../../core/errors.ts';
import type { EventLog } from '../events/index.ts';
import { OUTBOX_FIELD } from '../events/public/outbox.ts';
import { etagOf, parseIfMatch } from '../../lib/etag.ts';
import { isSystemActor, requestOf, systemActor, writeTenantId, type Actor } from '../../core/context.ts';
import type { Permissions } from '../../core/permissions.ts';
import type { Doc } from '../../core/hooks.ts';
// Types only: the files resource is registered through the `resources` service.
import type { ResourceService } from '../resources/index.ts';
import { normaliseType, overQuota, tooLarge, UploadInspector } from './inspect.ts';
import { sign, verify } from './signing.ts';
import { parseTransform, render, TRANSFORMABLE, variantName, type Transform } from './images.ts';
import type { ByteRange, StorageAdapter, StorageRegistry } from './storage.ts';
import type { FileStatus } from './model.ts';

/** The settings the service reads (`FILES_*`). */
export interface FilesSettings {
  storage: string;
  maxBytes: number;
  quota: number;
  allowed: readonly string[];
  signingKey: Buffer;
  signedUrlTtlSeconds: number;
  /** `FILES_TRANSFORM_ALLOWED` (`<w>x<h>` entries). */
  transformAllowed: readonly string[];
  maxPixels: number;
}

/** The transform parameters of a download (`w`, `h`, `fit`, `format`). */
export type TransformQuery = { w?: string | undefined; h?: string | undefined; fit?: string | undefined; format?: string | undefined };

/** A stored variant, as `variants.<name>` records it. */
interface Variant {
  width: number | null;
  height: number | null;
  fit: string;
  format: string;
  size: number;
  sha256: string;
}

export interface FilesDeps {
  resource: ResourceService;
  events: EventLog;
  storage: StorageRegistry;
  usage: Model<{ _id: string; used: number }>;
}

/** An upload whose bytes are stored and whose record is still `uploading`. */
export interface StoredUpload {
  id: string;
  tenantId: string;
  actor: Actor;
  size: number;
  sha256: string;
  content_type: string;
  storage: string;
}

/** What a download streams. */
export interface FileContent {
  file: Doc;
  etag: string;
  size: number;
  /** The type of what is sent: the file's, or the variant's. */
  content_type: string;
  /** The range served (206), or null for the whole file. */
  range: ByteRange | null;
  body: Readable | null;
}

/** Types a browser may show inline: raster images, which run no script. */
export const INLINE_TYPES: ReadonlySet<string> = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp', 'image/avif']);

const metadataError = (msg: string) => new ValidationError([{ loc: ['body', 'metadata'], msg, type: 'invalid_metadata' }]);

/**
 * Who may call each file operation: the one declaration its REST route and GraphQL field read.
 * Which files a caller reaches (its tenant's) is the service's rule; a signed URL's download needs
 * no caller (`public`: the signature is the credential).
 */
export const FILE_PERMISSIONS = { store: 'user', upload: 'user', content: 'public', signedUrl: 'user', remove: 'user' } as const satisfies Permissions;

/**
 * Files: uploads streamed through the checks (size, quota, type, sha256) into a storage adapter,
 * the `uploading` → `ready` → `deleted` lifecycle with its events, downloads and signed URLs.
 * Reads go through the files resource (`resource.get`), as every other resource's reads do, so
 * tenant scope and guards apply to downloads too.
 */
export class FilesService {
  constructor(
    private readonly deps: FilesDeps,
    private readonly settings: FilesSettings,
  ) {}

  /** The adapter new files go to. */
  adapter(): StorageAdapter {
    return this.deps.storage.get(this.settings.storage);
  }

  static key(tenantId: string, id: string): string {
    return `${tenantId}/${id}`;
  }

  /** Bytes of live files of the tenant. */
  async usage(tenantId: string): Promise<number> {
    return (await this.deps.usage.findById(tenantId).lean())?.used ?? 0;
  }

  /**
   * Refuses an upload of `size` bytes the tenant's quota cannot hold (a declared length: the bytes
   * are counted again when they are stored).
   * @throws AppError 413 PAYLOAD_TOO_LARGE with `quota` and `usage`, or with `max_bytes`
   */
  async checkQuota(tenantId: string, size: number): Promise<void> {
    if (size > this.settings.maxBytes) throw tooLarge(this.settings.maxBytes);
    const quota = this.settings.quota;
    if (!quota) return;
    const usage = await this.usage(tenantId);
    if (usage + size > quota) throw overQuota(quota, usage);
  }

  /**
   * Streams `body` through the checks into storage under a new `uploading` record. On any failure
   * the partial bytes and the record are removed and the error is rethrown.
   * @throws AppError 413 PAYLOAD_TOO_LARGE (size, or quota with `quota` and `usage`), 415 UNSUPPORTED_MEDIA_TYPE
   */
  async store(actor: Actor, body: Readable, info: { filename: string; declared_type: string | null }): Promise<StoredUpload> {
    const svc = this.deps.resource;
    svc.scope(actor);
    const tenantId = writeTenantId(actor);
    const quota = this.settings.quota;
    const usage = quota ? await this.usage(tenantId) : 0;
    if (quota && usage >= quota) throw overQuota(quota, usage);
    const adapter = this.adapter();
    const id = new Types.ObjectId();
    const now = new Date();
    const by = this.actorId(actor);
    await svc.model.collection.insertOne({
      _id: id, filename: info.filename || 'file', content_type: normaliseType(info.declared_type) ?? 'application/octet-stream', size: 0, sha256: null,
      storage: adapter.name, status: 'uploading' satisfies FileStatus, metadata: {}, variants: {},
      tenant_id: new Types.ObjectId(tenantId), created_at: now, updated_at: now, created_by: by, updated_by: by,
      is_deleted: false, deleted_at: null, deleted_by: null, version: 1,
    });
    const inspector = new UploadInspector({
      maxBytes: this.settings.maxBytes, quotaLeft: quota ? quota - usage : Infinity, quota, usage, declared: normaliseType(info.declared_type), allowed: this.settings.allowed,
    });
    body.once('error', (err) => inspector.destroy(err));
    body.pipe(inspector);
    try {
      await adapter.put(FilesService.key(tenantId, String(id)), inspector, { content_type: 'application/octet-stream' });
    } catch (err) {
      body.unpipe(inspector);
      await svc.model.collection.deleteOne({ _id: id });
      throw err;
    }
    return { id: String(id), tenantId, actor, size: inspector.size, sha256: inspector.sha256, content_type: inspector.contentType, storage: adapter.name };
  }

  /**
   * Makes a stored upload `ready` (staging `file.uploaded` in the same write), after counting it
   * against the tenant's quota. `metadata` is the client's JSON text or object (optional).
   * @throws ValidationError for metadata that is not a JSON object; 413 over the quota (bytes removed either way)
   */
  async finish(up: StoredUpload, metadata: unknown): Promise<Doc> {
    let meta: Doc = {};
    try {
      meta = parseMetadata(metadata);
      await this.charge(up.tenantId, up.size);
    } catch (err) {
      await this.abandon(up);
      throw err;
    }
    const svc = this.deps.resource;
    const old = (await svc.model.collection.findOne({ _id: new Types.ObjectId(up.id) })) as Doc;
    const now = new Date();
    const next = { ...old, status: 'ready', size: up.size, sha256: up.sha256, content_type: up.content_type, metadata: meta, updated_at: now, version: (old.version as number) + 1 };
    const entry = this.deps.events.stage('file.uploaded', {
      actor: up.actor, tenant_id: up.tenantId, version: next.version, previous: null, meta: this.eventMeta(up.actor, 'insert'),
    });
    const outbox = this.deps.events.outbox.update(svc.source, old, entry);
    const doc = await svc.model.collection.findOneAndUpdate(
      { _id: old._id as Types.ObjectId, version: old.version as number },
      { $set: { status: 'ready', size: up.size, sha256: up.sha256, content_type: up.content_type, metadata: meta, updated_at: now, [OUTBOX_FIELD]: outbox }, $inc: { version: 1 } },
      { returnDocument: 'after' },
    );
    await svc.committed(doc as Doc);
    return svc.view(doc as Doc);
  }

  /** Removes the bytes and the record of an upload that will not become a file. */
  async abandon(up: Pick<StoredUpload, 'id' | 'tenantId' | 'storage'>): Promise<void> {
    await this.deps.storage.get(up.storage).delete(FilesService.key(up.tenantId, up.id)).catch(() => undefined);
    await this.deps.resource.model.collection.deleteOne({ _id: new Types.ObjectId(up.id), status: 'uploading' });
  }

  /** Adds `size` to the tenant's usage unless that takes it over the quota (one conditional update). */
  private async charge(tenantId: string, size: number): Promise<void> {
    const quota = this.settings.quota;
    const usage = this.deps.usage.collection;
    if (!quota) {
      await usage.updateOne({ _id: tenantId as never }, { $inc: { used: size } }, { upsert: true });
      return;
    }
    await usage.updateOne({ _id: tenantId as never }, { $setOnInsert: { used: 0 } }, { upsert: true });
    const res = await usage.updateOne({ _id: tenantId as never, used: { $lte: quota - size } }, { $inc: { used: size } });
    if (res.modifiedCount !== 1) throw overQuota(quota, await this.usage(tenantId));
  }

  /** A ready file the actor may read: the resource's own read (tenant scope and guards). */
  async readable(actor: Actor, id: string): Promise<Doc> {
    const file = await this.deps.resource.get(actor, id);
    if (file.status !== 'ready') throw new ConflictError(`File ${id} is not ready (status ${String(file.status)})`, { status: file.status });
    return file;
  }

  /** A ready file by id alone, for a signed URL (the signature stands in for the read check). */
  private async byId(id: string): Promise<Doc> {
    const file = (await this.deps.resource.model.collection.findOne({ _id: this.deps.resource.oid(id), status: 'ready', is_deleted: false })) as Doc | null;
    if (!file) throw new NotFoundError('files', id);
    return file;
  }

  /**
   * The bytes to send for `GET /files/{id}/content`: 304 material when `ifNoneMatch` matches, the
   * `range` only when given (`Range` parsed by the route). A signed request passes `signed` instead
   * of an actor.
   * @throws AppError 403 for a bad or expired signature; 416 for a range past the end
   */
  async content(
    who: { actor: Actor } | { signed: { expires: string; signature: string } },
    id: string,
    opts: { range: string | null; ifNoneMatch: string | null; transform?: TransformQuery; variant?: string | undefined },
  ): Promise<FileContent> {
    let file: Doc;
    if ('actor' in who) file = await this.readable(who.actor, id);
    else {
      if (!verify(this.settings.signingKey, id, who.signed.expires, who.signed.signature)) throw new AppError(403, ErrorCode.ACCESS_DENIED, 'The signed URL is invalid or has expired');
      file = await this.byId(id);
    }
    let etag = `"${String(file.sha256)}"`;
    let size = file.size as number;
    let contentType = String(file.content_type);
    let key = FilesService.key(String(file.tenant_id), String(file._id));
    const named = opts.variant ? ((file.variants as Record<string, Variant> | undefined) ?? {})[opts.variant] : undefined;
    if (opts.variant && !named) throw new NotFoundError('variants', opts.variant);
    if (named) {
      key = `${key}/${opts.variant!}`;
      etag = `"${named.sha256}"`;
      size = named.size;
      contentType = `image/${named.format}`;
    }
    const t = !named && opts.transform ? parseTransform(opts.transform, this.settings.transformAllowed, contentType) : null;
    if (t) {
      if (!TRANSFORMABLE.has(contentType)) throw new AppError(415, ErrorCode.UNSUPPORTED_MEDIA_TYPE, `Files of type ${contentType} cannot be transformed`, { content_type: contentType });
      const name = variantName(t);
      const v = ((file.variants as Record<string, Variant> | undefined) ?? {})[name] ?? (await this.makeVariant(file, key, name, t));
      key = `${key}/${name}`;
      etag = `"${v.sha256}"`;
      size = v.size;
      contentType = `image/${t.format}`;
    }
    if (opts.ifNoneMatch && opts.ifNoneMatch.split(',').some((x) => x.trim() === etag || x.trim() === `W/${etag}` || x.trim() === '*')) {
      return { file, etag, size, content_type: contentType, range: null, body: null };
    }
    const range = opts.range ? parseRange(opts.range, size) : null;
    const body = await this.deps.storage.get(file.storage as string).get(key, range ?? undefined);
    return { file, etag, size, content_type: contentType, range, body };
  }

  /** Renders a named variant of a ready image (a `file` field's declared one) and records it on the file. */
  storeVariant(file: Doc, name: string, t: Transform): Promise<Variant> {
    return this.makeVariant(file, FilesService.key(String(file.tenant_id), String(file._id)), name, t);
  }

  /** Renders a variant from the stored original, stores it beside it and records it on the file (once; later reads use it). */
  private async makeVariant(file: Doc, key: string, name: string, t: Transform): Promise<Variant> {
    const adapter = this.deps.storage.get(file.storage as string);
    const { output, done } = render(await adapter.get(key), t, this.settings.maxPixels);
    await adapter.put(`${key}/${name}`, output, { content_type: `image/${t.format}` });
    const { size, sha256 } = await done;
    const v: Variant = { width: t.width, height: t.height, fit: t.fit, format: t.format, size, sha256 };
    // Derived data, not a change of the file: no version, no event.
    await this.deps.resource.model.collection.updateOne({ _id: file._id as Types.ObjectId }, { $set: { [`variants.${name}`]: v } });
    return v;
  }

  /** `{url, expires_at}` of a signed download URL (`base` is the server's origin). */
  async signedUrl(actor: Actor, id: string, base: string): Promise<{ url: string; expires_at: string }> {
    const file = await this.readable(actor, id);
    return this.signUrl(String(file._id), base);
  }

  /** A signed URL of file `id`, for a caller that has already checked the read (a data export). */
  signUrl(id: string, base: string): { url: string; expires_at: string } {
    const expires = Math.floor(Date.now() / 1000) + this.settings.signedUrlTtlSeconds;
    return { url: `${base}/files/${id}/content?${sign(this.settings.signingKey, id, expires)}`, expires_at: new Date(expires * 1000).toISOString() };
  }

  /**
   * Erasure: every file `userId` uploaded (in `tenantId`, or every tenant when null) loses its
   * bytes and variants, is deleted as the system (`file.deleted`, quota, referrers' `set_null` /
   * `cascade`) and then removed; safe to run again. Resolves to how many files it removed.
   */
  async eraseUploadsOf(userId: string, tenantId: string | null): Promise<number> {
    const by = Types.ObjectId.isValid(userId) ? [new Types.ObjectId(userId), userId] : [userId];
    const filter = { created_by: { $in: by }, ...(tenantId ? { tenant_id: new Types.ObjectId(tenantId) } : {}) };
    let n = 0;
    for await (const file of this.collection().find(filter)) {
      const key = FilesService.key(String(file.tenant_id), String(file._id));
      const adapter = this.deps.storage.get(file.storage as string);
      for (const v of Object.keys((file.variants as Doc | undefined) ?? {})) await adapter.delete(`${key}/${v}`);
      await adapter.delete(key);
      if (!file.is_deleted) await this.markDeleted(String(file._id));
      await this.collection().deleteOne({ _id: file._id });
      n++;
    }
    return n;
  }

  /**
   * Soft delete guarded by `If-Match` (status `deleted`, staging `file.deleted`); the bytes stay
   * until the purge job and stop counting against the quota at once.
   */
  async remove(actor: Actor, id: string, ifMatch: string | null | undefined): Promise<Doc> {
    const svc = this.deps.resource;
    if (!ifMatch) throw new EtagRequiredError();
    const scope = svc.scope(actor);
    const old = await svc.findOwned(id, scope);
    if (!parseIfMatch(ifMatch).includes(etagOf(old.version))) throw new EtagMismatchError();
    // `file` fields referencing it: `deny` refuses, `set_null` (their default) and `cascade` follow the delete.
    await svc.checkReferrers(old);
    const doc = await this.softDelete(old, scope, actor);
    if (!doc) throw await svc.lostRace(id, scope);
    await svc.cascadeFrom(actor, old);
    return svc.view(doc);
  }

  /** The files collection, for the purge job. */
  collection() {
    return this.deps.resource.model.collection;
  }

  /** Deletes a file as the system (its bytes are gone); false when another write won. */
  async markDeleted(id: string): Promise<boolean> {
    const old = (await this.collection().findOne({ _id: new Types.ObjectId(id) })) as Doc | null;
    if (!old) return false;
    const actor = systemActor(old.tenant_id ? String(old.tenant_id) : null);
    // Its bytes are gone: `deny` rules cannot keep it; `set_null` and `cascade` still follow.
    if (!(await this.softDelete(old, {}, actor))) return false;
    await this.deps.resource.cascadeFrom(actor, old);
    return true;
  }

  /** Soft delete of `old` at its version, staging `file.deleted`; gives its bytes back to the quota. */
  private async softDelete(old: Doc, scope: Doc, actor: Actor): Promise<Doc | null> {
    const svc = this.deps.resource;
    const now = new Date();
    const by = this.actorId(actor);
    const tenantId = old.tenant_id ? String(old.tenant_id) : null;
    const entry = this.deps.events.stage('file.deleted', { actor, tenant_id: tenantId, version: (old.version as number) + 1, previous: svc.view(old), meta: this.eventMeta(actor, 'delete') });
    const doc = (await svc.model.collection.findOneAndUpdate(
      { _id: old._id as Types.ObjectId, ...scope, version: old.version as number },
      { $set: { status: 'deleted', is_deleted: true, deleted_at: now, deleted_by: by, updated_at: now, updated_by: by, [OUTBOX_FIELD]: this.deps.events.outbox.update(svc.source, old, entry) }, $inc: { version: 1 } },
      { returnDocument: 'after' },
    )) as Doc | null;
    if (!doc) return null;
    await svc.committed(doc);
    if (old.status === 'ready' && tenantId) await this.deps.usage.collection.updateOne({ _id: tenantId as never }, { $inc: { used: -(old.size as number) } });
    return doc;
  }

  private actorId(actor: Actor): Types.ObjectId | null {
    return isSystemActor(actor) || !Types.ObjectId.isValid(actor.id) ? null : new Types.ObjectId(actor.id);
  }

  private eventMeta(actor: Actor, operation: 'insert' | 'delete'): Doc {
    const ip = requestOf(actor)?.ip ?? null;
    return { resource: 'files', ip, bulk: false, audit: { operation, resource: 'files', actor_name: isSystemActor(actor) ? null : actor.name ?? null, ip } };
  }
}

/** The client's `metadata`: a JSON object (as text in a multipart field), or nothing. */
function parseMetadata(raw: unknown): Doc {
  if (raw === undefined || raw === null || raw === '') return {};
  let v: unknown = raw;
  if (typeof raw === 'string') {
    try {
      v = JSON.parse(raw) as unknown;
    } catch {
      throw metadataError('metadata must be a JSON object');
    }
  }
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw metadataError('metadata must be a JSON object');
  if (JSON.stringify(v).length > 16_384) throw metadataError('metadata must be at most 16384 characters of JSON');
  return v as Doc;
}

/** 416 `RANGE_NOT_SATISFIABLE`, with the `Content-Range` HTTP asks for. */
function rangeNotSatisfiable(header: string, size: number): AppError {
  const err = new AppError(416, 'RANGE_NOT_SATISFIABLE', `The range ${header} is outside the file's ${size} bytes`, { size });
  err.headers = { 'Content-Range': `bytes */${size}` };
  return err;
}

/** The files plugin's codes in the error catalogue. */
export const fileErrorCodes: ErrorCodes = {
  RANGE_NOT_SATISFIABLE: {
    example: rangeNotSatisfiable('bytes=900-', 100),
    description: 'A file download whose `Range` starts past the end (`Content-Range: bytes */<size>`).',
  },
};

/**
 * One `bytes=` range of a file of `size` bytes; a header with several ranges or another unit is
 * ignored (null: the whole file), as HTTP allows.
 * @throws AppError 416 RANGE_NOT_SATISFIABLE for a range that starts past the end
 */
export function parseRange(header: string, size: number): ByteRange | null {
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return null;
  let start: number;
  let end: number;
  if (m[1] === '') {
    const n = Number(m[2]);
    start = Math.max(0, size - n);
    end = size - 1;
    if (n === 0) start = size;
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
    if (m[2] !== '' && Number(m[2]) < start) return null;
  }
  if (start >= size || end < start) {
    throw rangeNotSatisfiable(header, size);
  }
  return { start, end };
}
