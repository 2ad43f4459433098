import { z } from 'zod';
import { bool, csv, int } from './fields.ts';

/** A comma-separated list of lower-cased entries (media types). */
const lowerCsv = csv.transform((list) => list.map((x) => x.toLowerCase()));

/**
 * Settings of the files plugin (docs/files.md), spread into the config schema of `config/index.ts`.
 * Names are the environment variable names.
 */
export const filesSettings = {
  /** Mounts `/files` (uploads, downloads, tus) and the GraphQL `File` fields. @default false */
  FILES_ENABLED: bool(false),
  /**
   * Adapter new files are stored with: `gridfs` (the same MongoDB), `s3`, or one a plugin registers.
   * Each file records its adapter, so changing this never strands older files. @default 'gridfs'
   */
  FILES_STORAGE: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, 'must be an adapter name such as gridfs or s3').default('gridfs'),
  /** Bucket of the `s3` adapter; the adapter is registered only when this is set. */
  FILES_S3_BUCKET: z.string().min(1).optional(),
  /** Endpoint of an S3-compatible service (MinIO, R2, ...); set, requests use path-style addressing. Unset = AWS. */
  FILES_S3_ENDPOINT: z.string().url().optional(),
  /** @default 'us-east-1' */
  FILES_S3_REGION: z.string().min(1).default('us-east-1'),
  /** S3 credentials; unset, the AWS SDK's default chain (instance roles, shared config) applies. */
  AWS_ACCESS_KEY_ID: z.string().min(1).optional(),
  AWS_SECRET_ACCESS_KEY: z.string().min(1).optional(),
  AWS_SESSION_TOKEN: z.string().min(1).optional(),
  /** Largest file, in bytes; an upload is cut off (413) as soon as it passes this. @default 52428800 (50 MB) */
  FILES_MAX_BYTES: int(50 * 1024 * 1024, 1),
  /** Bytes of live files one tenant may hold; 0 = no quota. @default 0 */
  FILES_TENANT_QUOTA_BYTES: int(0),
  /**
   * Content types accepted (as sniffed from the bytes), comma-separated; `image/*` matches a family.
   * Empty = any type. @example image/*,application/pdf
   */
  FILES_ALLOWED_TYPES: lowerCsv,
  /** Secret of signed download URLs (HMAC-SHA256). Unset, one is derived from `TOKEN_SECRET`. */
  FILES_SIGNED_URL_SECRET: z.string().min(16, 'must be at least 16 characters').optional(),
  /** Lifetime of a signed download URL. @default 900 */
  FILES_SIGNED_URL_TTL_SECONDS: int(900, 1),
  /** A resumable (tus) upload not finished within this many hours expires and its parts are removed. @default 24 */
  FILES_UPLOAD_EXPIRY_HOURS: z.coerce.number().positive().default(24),
  /**
   * Sizes an on-demand image transform may ask for (`?w=&h=` of `GET /files/{id}/content`),
   * comma-separated `<width>x<height>`, 0 = that side follows the aspect ratio. Empty = no
   * transforms. @example 200x200,800x0
   */
  FILES_TRANSFORM_ALLOWED: lowerCsv,
  /** Largest image (width × height) decoded for a transform; larger ones are refused (413) before decoding. @default 40000000 */
  FILES_MAX_PIXELS: int(40_000_000, 1),
  /** Days after a soft delete before the purge job removes a file's bytes. @default 30 */
  FILES_PURGE_AFTER_DAYS: int(30, 1),
};
