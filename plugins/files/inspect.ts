/** The checks an upload's bytes pass on their way to storage: size, quota, type, sha256. */
import { createHash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { fileTypeFromBuffer, supportedMimeTypes } from 'file-type';
import { AppError, ErrorCode } from '../../core/errors.ts';

/** Bytes file-type reads to recognise a format. */
const SNIFF_BYTES = 4100;

/** Declared types that say nothing about the bytes. */
const UNDECLARED = new Set(['', 'application/octet-stream', 'binary/octet-stream']);

/** `image/png; x=y` → `image/png`; null for a type that says nothing. */
export const normaliseType = (t: string | null | undefined): string | null => {
  const base = (t ?? '').split(';')[0]!.trim().toLowerCase();
  return UNDECLARED.has(base) ? null : base;
};

/** True when `type` is in the allowed list (`image/*` matches a family); an empty list allows any. */
export const typeAllowed = (type: string, allowed: readonly string[]): boolean =>
  !allowed.length || allowed.some((a) => a === type || (a.endsWith('/*') && type.startsWith(a.slice(0, -1))));

export interface InspectLimits {
  /** `FILES_MAX_BYTES`. */
  maxBytes: number;
  /** Bytes left of the tenant's quota when the upload began (Infinity without a quota). */
  quotaLeft: number;
  quota: number;
  usage: number;
  /** The type the client declared (multipart part header, tus metadata). */
  declared: string | null;
  allowed: readonly string[];
}

export const tooLarge = (maxBytes: number) => new AppError(413, ErrorCode.PAYLOAD_TOO_LARGE, `The file is larger than ${maxBytes} bytes`, { max_bytes: maxBytes });
export const overQuota = (quota: number, usage: number) =>
  new AppError(413, ErrorCode.PAYLOAD_TOO_LARGE, 'The file would take the tenant over its storage quota', { quota, usage });

/**
 * Counts, hashes and sniffs the bytes passing through; fails the stream (so nothing past the limit
 * is stored) on the first byte over `maxBytes` or over the quota, and before passing any byte on
 * when the sniffed type disagrees with the declared one or is not allowed.
 */
export class UploadInspector extends Transform {
  size = 0;
  /** The type the file is stored with: sniffed, else declared, else `application/octet-stream`. */
  contentType = 'application/octet-stream';
  private readonly hash = createHash('sha256');
  private head: Buffer[] = [];
  private headBytes = 0;
  private decided = false;

  constructor(private readonly limits: InspectLimits) {
    super();
  }

  get sha256(): string {
    return this.hash.copy().digest('hex');
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.size += chunk.length;
    if (this.size > this.limits.maxBytes) return cb(tooLarge(this.limits.maxBytes));
    if (this.size > this.limits.quotaLeft) return cb(overQuota(this.limits.quota, this.limits.usage));
    this.hash.update(chunk);
    if (this.decided) return cb(null, chunk);
    this.head.push(chunk);
    this.headBytes += chunk.length;
    if (this.headBytes < SNIFF_BYTES) return cb();
    this.release(cb);
  }

  override _flush(cb: TransformCallback): void {
    if (this.decided) return cb();
    this.release(cb);
  }

  private release(cb: TransformCallback): void {
    const head = Buffer.concat(this.head, this.headBytes);
    this.head = [];
    this.decide(head).then(
      () => {
        this.decided = true;
        cb(null, head);
      },
      (err: unknown) => cb(err as Error),
    );
  }

  private async decide(head: Buffer): Promise<void> {
    const detected = head.length ? (await fileTypeFromBuffer(head))?.mime ?? null : null;
    const declared = this.limits.declared;
    // A format file-type knows, declared for bytes that are not of it, is as much a lie as a mismatch.
    if (declared && declared !== detected && (detected || supportedMimeTypes.has(declared))) {
      throw new AppError(415, ErrorCode.UNSUPPORTED_MEDIA_TYPE, `The declared type ${declared} does not match the file's bytes (${detected ?? 'unrecognised'})`, { declared, detected });
    }
    this.contentType = detected ?? declared ?? 'application/octet-stream';
    if (!typeAllowed(this.contentType, this.limits.allowed)) {
      throw new AppError(415, ErrorCode.UNSUPPORTED_MEDIA_TYPE, `Files of type ${this.contentType} are not accepted`, { content_type: this.contentType, allowed: this.limits.allowed });
    }
  }
}
