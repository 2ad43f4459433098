/**
 * The GraphQL fragment of the notes plugin: `notes` (query) and `createNote` (mutation). Resolvers
 * validate with the same zod schemas as REST and call the same service.
 */
import type { Builder } from '../../../core/graphql.ts';
import { givenArgs, pageObject, parseInput, scopes } from '../../../core/graphql.ts';
import { archiveNotesInput, createNoteInput, type listNotesQuery, type NoteView } from './schemas.ts';
import { NOTES_PERMISSIONS, type NotesService } from './service.ts';

/** `query` is the same schema object the REST route validates with. */
export function notesGraphQL(builder: Builder, notes: NotesService, query: ReturnType<typeof listNotesQuery>): void {
  const Note = builder.objectRef<NoteView>('Note');
  Note.implement({
    fields: (t) => ({
      id: t.exposeID('id', { nullable: false }),
      title: t.exposeString('title', { nullable: false }),
      body: t.exposeString('body', { nullable: false }),
      archived: t.exposeBoolean('archived', { nullable: false }),
      tenant_id: t.exposeString('tenant_id', { nullable: false }),
      created_by: t.exposeString('created_by'),
      created_at: t.expose('created_at', { type: 'DateTime', nullable: false }),
      formatted: t.exposeString('formatted'),
    }),
  });
  const Page = pageObject(builder, 'NotesPage', Note);
  builder.queryField('notes', (t) =>
    t.withAuth(scopes(NOTES_PERMISSIONS.list)).field({
      type: Page, nullable: false, description: 'Notes of the caller\'s tenant, as GET /notes',
      args: { page: t.arg.int(), per_page: t.arg.int(), archived: t.arg.boolean(), format: t.arg.string() },
      resolve: (_r, a, ctx) => {
        const args = givenArgs(a);
        // REST sends `archived` as a query string; one schema serves both.
        if (typeof args.archived === 'boolean') args.archived = String(args.archived);
        return notes.list(ctx.actor, parseInput(query, args));
      },
    }),
  );
  builder.mutationField('createNote', (t) =>
    t.withAuth(scopes(NOTES_PERMISSIONS.create)).field({
      type: Note, nullable: false, description: 'Create a note, as POST /notes',
      args: { title: t.arg.string({ required: true }), body: t.arg.string() },
      resolve: (_r, a, ctx) => notes.create(ctx.actor, parseInput(createNoteInput, givenArgs(a))),
    }),
  );
  builder.mutationField('archiveNotes', (t) =>
    t.withAuth(scopes(NOTES_PERMISSIONS.archiveOlderThan)).int({
      nullable: false, description: 'Archive the tenant\'s notes older than older_than_days, as POST /notes/archive; returns how many (administrators)',
      args: { older_than_days: t.arg.int({ required: true }) },
      resolve: async (_r, a, ctx) => (await notes.archiveOlderThan(ctx.actor, parseInput(archiveNotesInput, givenArgs(a)))).archived,
    }),
  );
}
