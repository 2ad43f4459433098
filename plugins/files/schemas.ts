import { z } from 'zod';
import { FILE_STATUSES } from './model.ts';

export const fileIdParams = z.object({ id: z.string().describe('File id (24 hex characters)') });

/** Query of `GET /files/{id}/content`: a signed URL's `expires` and `signature`, or nothing. */
export const contentQuery = z
  .object({
    expires: z.string().max(16).optional().describe('Unix time the signed URL expires at (with `signature`)'),
    signature: z.string().max(128).optional().describe('HMAC of a signed URL (`POST /files/{id}/signed-url`)'),
    w: z.string().max(6).optional().describe('Image transform: width (a size of FILES_TRANSFORM_ALLOWED)'),
    h: z.string().max(6).optional().describe('Image transform: height'),
    fit: z.string().max(10).optional().describe('Image transform: cover (default), contain, fill, inside, outside'),
    variant: z.string().max(64).optional().describe('A variant declared by a `file` field (e.g. `thumb`), rendered when the file was attached'),
    format: z.string().max(5).optional().describe('Image transform: webp, jpeg, png, avif (default: the original\'s, else jpeg)'),
  })
  .strict();

export const signedUrlView = z.object({
  url: z.string().describe('Absolute URL serving the content without credentials until `expires_at`'),
  expires_at: z.string().describe('ISO 8601 time the URL stops working'),
});

/** The file record as events carry it (`data`). */
export const fileEventData = z.object({
  _id: z.string(),
  tenant_id: z.string().nullable(),
  filename: z.string(),
  content_type: z.string(),
  size: z.number().int(),
  sha256: z.string().nullable(),
  storage: z.string(),
  status: z.enum(FILE_STATUSES),
  metadata: z.record(z.string(), z.unknown()),
  variants: z.record(z.string(), z.unknown()),
  version: z.number().int(),
});

export const fileEventTypes = () => [
  { name: 'file.uploaded', description: 'A file was fully stored and became ready (multipart or resumable upload); data is its record', data: fileEventData },
  { name: 'file.deleted', description: 'A file was deleted (soft: its bytes are purged later); data is its record', data: fileEventData },
];
