/**
 * The stored shape of drafts and the pure helpers the write and read paths share (drafts/service.ts
 * holds the operations). Nothing here imports the resource service.
 */
import { ValidationError } from '../../../core/errors.ts';
import type { Actor } from '../../../core/context.ts';
import type { Doc } from '../../../core/hooks.ts';

/** What {@link draftFields} uses of a resource service. */
export interface DraftWriter {
  def: { drafts: boolean };
  actorId(actor: Actor | null): unknown;
}

/** A pending draft as stored. `values` null: the top-level fields are the draft (a document not published). */
export interface StoredDraft {
  values: Doc | null;
  author: unknown;
  saved_at: Date;
  publish_at: Date | null;
}

/** What a draft write asks for: `?draft=true` and an optional `publish_at`. */
export interface DraftOptions {
  publishAt: Date | null;
}

/**
 * The draft options of a write from its query (`draft`, `publish_at`), or null for a write that publishes.
 * @throws ValidationError (422) for a `draft` other than true/false, a `publish_at` that is not a date, or one without `draft=true`
 */
export function draftOptionsOf(query: { draft?: unknown; publish_at?: unknown }): DraftOptions | null {
  const { draft, publish_at: at } = query;
  if (draft != null && draft !== 'true' && draft !== 'false' && typeof draft !== 'boolean') throw invalid('draft', 'expected true or false');
  const on = draft === 'true' || draft === true;
  if (at === undefined || at === null) return on ? { publishAt: null } : null;
  const when = at instanceof Date ? at : typeof at === 'string' && /^\d{4}-\d\d-\d\dT/.test(at) ? new Date(at) : null;
  if (!when || Number.isNaN(when.getTime())) throw invalid('publish_at', 'expected an ISO 8601 date-time');
  if (!on) throw invalid('publish_at', 'publish_at needs draft=true');
  return { publishAt: when };
}

const invalid = (param: string, msg: string) => new ValidationError([{ loc: ['query', param], msg, type: 'value_error' }]);

/** The fields a draft write stores with the document (`_draft`), or with a write that publishes (`_published: true`, no draft). */
export function draftFields(svc: DraftWriter, actor: Actor | null, draft: DraftOptions | null | undefined, values: Doc | null = null): Doc {
  if (!svc.def.drafts) return {};
  if (!draft) return { _published: true, _draft: null };
  const stored: StoredDraft = { values, author: svc.actorId(actor), saved_at: new Date(), publish_at: draft.publishAt };
  return { _draft: stored };
}
