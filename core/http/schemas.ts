import { z } from 'zod';

/** 24-hex object id, as every id in paths and bodies. */
export const objectId = z.string().regex(/^[0-9a-fA-F]{24}$/, 'must be a 24-character hexadecimal object id');

/** `page` / `per_page` query parameters of admin listings. */
export const pageQuery = (defaultPerPage: number, maxPerPage: number) =>
  z.object({
    page: z.coerce.number().int().min(1).default(1),
    per_page: z.coerce.number().int().min(1).max(maxPerPage).default(defaultPerPage),
  });

export const idParams = z.object({ id: objectId });
