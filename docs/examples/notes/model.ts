/**
 * The mongoose schema of the notes plugin and the types derived from it (never written twice).
 */
import { Schema, type Connection, type InferSchemaType, type Model, type Types } from 'mongoose';
import { modelOn } from '../../../core/db.ts';
import { OUTBOX_FIELD, outboxPath } from '../../../plugins/events/public/outbox.ts';

export const NOTES_COLLECTION = 'notes';

export const noteSchema = new Schema(
  {
    title: { type: String, required: true, maxlength: 200 },
    body: { type: String, default: '' },
    archived: { type: Boolean, default: false },
    // Every note belongs to one tenant; every query of the plugin filters on it.
    tenant_id: { type: Schema.Types.ObjectId, required: true },
    /** The user who wrote it; null when a system actor (a job) did. */
    created_by: { type: Schema.Types.ObjectId, default: null },
    created_at: { type: Date, required: true },
    // The note's events (`note.created`) wait here, written by the same insert, until the relay moves them to the log.
    ...outboxPath,
  },
  { versionKey: false },
);
// Listings filter on the tenant and sort on created_at.
noteSchema.index({ tenant_id: 1, created_at: -1 });
// The event log's sweep finds the entries of a writer that died before relaying them.
noteSchema.index({ [`${OUTBOX_FIELD}.created_at`]: 1 }, { sparse: true });

export type NoteDoc = InferSchemaType<typeof noteSchema>;
/** A note as read back with `.lean()`. */
export type NoteRecord = NoteDoc & { _id: Types.ObjectId };
export type NoteModel = Model<NoteDoc>;

/** Registers (once per connection) and returns the model; each app has its own connection. */
export const noteModel = (conn: Connection): NoteModel =>
  modelOn(conn, 'ExampleNote', noteSchema, NOTES_COLLECTION);
