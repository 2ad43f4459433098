import type Koa from 'koa';
import { z } from 'zod';

/**
 * One page of an offset-paginated list, as every list endpoint answers it (REST body and GraphQL
 * object alike). The same numbers go out as the `X-Total-Count`, `X-Page`, `X-Per-Page` and
 * `X-Total-Pages` headers (`setPageHeaders`).
 */
export interface Page<T> {
  items: T[];
  total: number;
  page: number;
  per_page: number;
  total_pages: number;
}

/** Builds a page from its rows, the total count and the request's `page` / `per_page`. */
export function pageOf<T>(items: T[], total: number, q: { page: number; per_page: number }): Page<T> {
  return { items, total, page: q.page, per_page: q.per_page, total_pages: Math.ceil(total / q.per_page) };
}

/** The zod schema of a page of `item` (documents the REST response). */
export const pageSchema = <T extends z.ZodType>(item: T) =>
  z.object({
    items: z.array(item),
    total: z.number().int(),
    page: z.number().int(),
    per_page: z.number().int(),
    total_pages: z.number().int(),
  });

/** Header docs of a paginated route, for `defineRoute({ docs: { responseHeaders } })`. */
export const pageHeaderDocs = (what: string): Record<string, string> => ({
  'X-Total-Count': what,
  'X-Page': 'Page',
  'X-Per-Page': 'Page size',
  'X-Total-Pages': 'Pages',
});

/** Sets the pagination headers of `page` on the response and returns it, for a route handler's `return`. */
export function setPageHeaders<T>(ctx: Koa.Context, page: Omit<Page<T>, 'items'> & { items: T[] }): Page<T> {
  ctx.set('X-Total-Count', String(page.total));
  ctx.set('X-Page', String(page.page));
  ctx.set('X-Per-Page', String(page.per_page));
  ctx.set('X-Total-Pages', String(page.total_pages));
  return page;
}
