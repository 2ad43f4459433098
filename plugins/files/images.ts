/** Image variants with sharp: made once per size and format, stored beside the original. */
import type { Readable } from 'node:stream';
import { createHash } from 'node:crypto';
import { PassThrough } from 'node:stream';
import sharp from 'sharp';
import { AppError, ErrorCode, ValidationError } from '../../core/errors.ts';

export const FITS = ['cover', 'contain', 'fill', 'inside', 'outside'] as const;
export const FORMATS = ['webp', 'jpeg', 'png', 'avif'] as const;
/** Types sharp decodes that a transform accepts. */
export const TRANSFORMABLE: ReadonlySet<string> = new Set(['image/png', 'image/jpeg', 'image/webp', 'image/gif', 'image/avif', 'image/tiff']);

export interface Transform {
  width: number | null;
  height: number | null;
  fit: (typeof FITS)[number];
  format: (typeof FORMATS)[number];
}

/** The stored variant's name: one per distinct transform. */
export const variantName = (t: Transform) => `w${t.width ?? 0}_h${t.height ?? 0}_${t.fit}_${t.format}`;

const bad = (param: string, msg: string) => new ValidationError([{ loc: ['query', param], msg, type: 'transform_not_allowed' }]);

/**
 * The transform a query asks for, or null when it asks for none.
 * @throws ValidationError for a size outside `allowed` (`<w>x<h>` entries) or an unknown fit or format
 */
export function parseTransform(q: { w?: string | undefined; h?: string | undefined; fit?: string | undefined; format?: string | undefined }, allowed: readonly string[], original: string): Transform | null {
  if (q.w === undefined && q.h === undefined && q.fit === undefined && q.format === undefined) return null;
  const w = q.w === undefined ? 0 : Number(q.w);
  const h = q.h === undefined ? 0 : Number(q.h);
  if (!Number.isInteger(w) || w < 0) throw bad('w', 'w must be a whole number of pixels');
  if (!Number.isInteger(h) || h < 0) throw bad('h', 'h must be a whole number of pixels');
  if ((w || h) && !allowed.includes(`${w}x${h}`)) throw bad(q.w !== undefined ? 'w' : 'h', `size ${w}x${h} is not allowed (allowed: ${allowed.join(', ') || 'none'})`);
  const fit = (q.fit ?? 'cover') as Transform['fit'];
  if (!FITS.includes(fit)) throw bad('fit', `fit must be one of ${FITS.join(', ')}`);
  const fallback = original === 'image/png' ? 'png' : original === 'image/webp' ? 'webp' : 'jpeg';
  const format = (q.format ?? fallback) as Transform['format'];
  if (!FORMATS.includes(format)) throw bad('format', `format must be one of ${FORMATS.join(', ')}`);
  return { width: w || null, height: h || null, fit, format };
}

/**
 * Renders `input` with the transform into a buffer-free stream, counting size and sha256.
 * sharp refuses an image above `maxPixels` from its header, before decoding it.
 */
export function render(input: Readable, t: Transform, maxPixels: number): { output: Readable; done: Promise<{ size: number; sha256: string }> } {
  const pipeline = sharp({ limitInputPixels: maxPixels, failOn: 'error' })
    .rotate()
    .resize({ width: t.width ?? undefined, height: t.height ?? undefined, fit: t.fit, withoutEnlargement: true })
    .toFormat(t.format);
  const out = new PassThrough();
  const hash = createHash('sha256');
  let size = 0;
  const done = new Promise<{ size: number; sha256: string }>((resolve, reject) => {
    const fail = (err: Error) => {
      const e = /pixel limit/i.test(err.message)
        ? new AppError(413, ErrorCode.PAYLOAD_TOO_LARGE, `The image is larger than ${maxPixels} pixels`, { max_pixels: maxPixels })
        : new AppError(415, ErrorCode.UNSUPPORTED_MEDIA_TYPE, 'The file could not be decoded as an image', {});
      out.destroy(e);
      reject(e);
    };
    pipeline.on('error', fail);
    input.on('error', fail);
    pipeline.on('data', (c: Buffer) => {
      size += c.length;
      hash.update(c);
    });
    pipeline.on('end', () => resolve({ size, sha256: hash.digest('hex') }));
  });
  done.catch(() => undefined);
  input.pipe(pipeline).pipe(out);
  return { output: out, done };
}
