/**
 * Inputs and outputs of the notes API. REST routes and GraphQL resolvers validate with the same
 * zod schemas, so both answer a bad value with the same 422 `VALIDATION_ERROR`.
 */
import { z } from 'zod';
import { pageQuery } from '../../../core/http/schemas.ts';
import { pageSchema } from '../../../lib/page.ts';

/** Options of the plugin: `notesPlugin.configure({ ... })`, checked by the kernel at start-up. */
export const notesOptions = z.object({
  /** Notes older than this many days are archived by the `archive_old_notes` job. @default 30 */
  archive_after_days: z.number().int().min(1).default(30),
  /** Page size of `GET /notes` when the client sends none. @default 20 */
  default_per_page: z.number().int().min(1).max(100).default(20),
});
export type NotesOptions = z.output<typeof notesOptions>;

/** `POST /notes` and GraphQL `createNote`. Unknown fields are refused. */
export const createNoteInput = z
  .object({
    title: z.string().trim().min(1).max(200),
    body: z.string().max(10_000).default(''),
  })
  .strict();
export type CreateNoteInput = z.output<typeof createNoteInput>;

/**
 * `GET /notes` and GraphQL `notes`. `format` names a formatter another plugin registered; the
 * names are read at validation time, so REST (`loc: ['query', 'format']`) and GraphQL
 * (`['args', 'format']`) refuse an unknown one the same way.
 */
export const listNotesQuery = (defaultPerPage: number, formats: () => readonly string[]) =>
  pageQuery(defaultPerPage, 100)
    .extend({
      archived: z.enum(['true', 'false']).transform((v) => v === 'true').optional(),
      format: z.string().min(1).max(50).optional(),
    })
    .strict()
    .superRefine((v, ctx) => {
      if (v.format === undefined || formats().includes(v.format)) return;
      ctx.addIssue({ code: 'custom', path: ['format'], message: `unknown format; one of: ${formats().join(', ') || '(none registered)'}` });
    });
export type ListNotesQuery = z.output<ReturnType<typeof listNotesQuery>>;

/**
 * Parameters of the `archive_old_notes` job. The jobs plugin validates them before it queues a run
 * (422 `VALIDATION_ERROR`, nothing queued) and derives its registry's `params` from this schema:
 * `.describe()` is the description shown there. No `tenant_id`: the tenant is the run's
 * (`per_tenant`), never a parameter.
 */
export const archiveJobParams = z
  .object({
    older_than_days: z.number().int().min(1).optional().describe('Archive notes older than this many days; default: the plugin option archive_after_days'),
    batch_size: z.number().int().min(1).max(1000).default(200).describe('Notes archived per write; cancellation is checked between writes'),
  })
  .strict();

// Output shapes: the REST response schema (OpenAPI) and the service's return types.

export const noteView = z.object({
  id: z.string(),
  title: z.string(),
  body: z.string(),
  archived: z.boolean(),
  tenant_id: z.string(),
  created_by: z.string().nullable(),
  created_at: z.iso.datetime(),
  /** Output of the formatter named in `format`; null without one. */
  formatted: z.string().nullable(),
});
export type NoteView = z.output<typeof noteView>;

/** One page of notes: `items`, `total`, `page`, `per_page`, `total_pages` (lib/page.ts). */
export const notesPage = pageSchema(noteView);
export type NotesPage = z.output<typeof notesPage>;

/** `POST /notes/archive` and GraphQL `archiveNotes` (administrators). */
export const archiveNotesInput = z.object({ older_than_days: z.number().int().min(1) }).strict();
export type ArchiveNotesInput = z.output<typeof archiveNotesInput>;
export const archiveNotesResult = z.object({ archived: z.number().int() });
