/**
 * The notes plugin: the template every new plugin copies (docs/plugins.md). This file only wires:
 * the model (model.ts), the zod inputs (schemas.ts), the logic (service.ts) and the GraphQL
 * fragment (graphql.ts) come from their own files.
 */
import { definePlugin, type JobDefinition } from '../../../core/plugin.ts';
import { defineRoute } from '../../../core/http/route.ts';
import { pageHeaderDocs, setPageHeaders } from '../../../lib/page.ts';
import { noteModel } from './model.ts';
import { archiveJobParams, archiveNotesInput, archiveNotesResult, createNoteInput, listNotesQuery, noteView, notesOptions, notesPage } from './schemas.ts';
import { NOTE_CREATED, NOTES_PERMISSIONS, NotesService, type NotesApi } from './service.ts';
import { notesGraphQL } from './graphql.ts';

export type { NoteFormatter, NotesApi } from './service.ts';
export type { NoteView } from './schemas.ts';

declare module '../../../core/services.ts' {
  interface Services {
    notes: NotesApi;
  }
}

const DAY_MS = 86_400_000;

/**
 * Tenant-scoped notes: `GET/POST /notes`, GraphQL `notes` / `createNote`, the hook
 * `BEFORE_NOTE_CREATE` (defaults and veto, before the write), the event `note.created` on the event
 * log (what other plugins react to), the per-tenant job `archive_old_notes`, and a formatter
 * registry other plugins fill through `services.get('notes').registerFormatter()`.
 */
export const notesPlugin = definePlugin({
  name: 'notes',
  options: notesOptions,
  setup({ db, hooks, tenancy, options, services }) {
    const events = services.get('events');
    const notes = new NotesService({ model: noteModel(db), hooks, events, tenancy });
    // The sweep relays the entries of a process that died between the insert and the relay.
    events.addSource(notes.source);
    services.provide('notes', notes);
    const tags = ['notes'];
    const listQuery = listNotesQuery(options.default_per_page, () => notes.formatterNames());

    // Run by the jobs plugin (docs/jobs.md) when JOBS_ENABLED=true; without it nothing runs it.
    const archiveOldNotes: JobDefinition<typeof archiveJobParams> = {
      name: 'archive_old_notes',
      description: 'Archive each tenant\'s notes older than archive_after_days',
      timeout: 600,
      // Once per tenant, each run as systemActor(tenant): the job never walks tenants itself.
      per_tenant: true,
      // Checked before a run is queued (422); `run` receives the parsed, defaulted value.
      params: archiveJobParams,
      async run(ctx, { older_than_days, batch_size }) {
        const days = older_than_days ?? options.archive_after_days;
        const cutoff = new Date(Date.now() - days * DAY_MS);
        // ctx.actor is the caller: the service's tenant filter, not this job, decides the scope.
        const total = await notes.countArchivable(ctx.actor, cutoff);
        let archived = 0;
        for (;;) {
          ctx.signal.throwIfAborted(); // cancelled or timed out: stop before the next write
          const n = await notes.archiveBatch(ctx.actor, cutoff, batch_size);
          if (n === 0) break;
          archived += n;
          await ctx.progress(archived, total);
        }
        ctx.log(`archived ${archived} notes older than ${days} days`);
        return { archived, cutoff_date: cutoff.toISOString() }; // the run's result (JSON)
      },
    };

    return {
      // Declared once here: its name, and the schema of `data` (GET /events/types, /openapi.json).
      eventTypes: [{ name: NOTE_CREATED, description: 'A note was created; data is the note', data: noteView.omit({ formatted: true }) }],
      routes: [
        defineRoute({
          method: 'GET', path: '/notes', auth: NOTES_PERMISSIONS.list, tags, summary: 'Notes of the caller\'s tenant, newest first',
          query: listQuery, response: notesPage, docs: { responseHeaders: pageHeaderDocs('Notes matching the query') },
          handler: async ({ actor, query, ctx }) => setPageHeaders(ctx, await notes.list(actor, query)),
        }),
        defineRoute({
          method: 'POST', path: '/notes', auth: NOTES_PERMISSIONS.create, tags, status: 201, summary: 'Create a note in the caller\'s tenant',
          body: createNoteInput, response: noteView,
          handler: ({ actor, body }) => notes.create(actor, body),
        }),
        defineRoute({
          method: 'POST', path: '/notes/archive', auth: NOTES_PERMISSIONS.archiveOlderThan, tags, summary: 'Archive the tenant\'s notes older than older_than_days (administrators)',
          body: archiveNotesInput, response: archiveNotesResult, docs: { errors: [403] },
          handler: ({ actor, body }) => notes.archiveOlderThan(actor, body),
        }),
      ],
      graphql: (builder) => notesGraphQL(builder, notes, listQuery),
      jobs: [archiveOldNotes],
      // Providers register in their setup(); after that the registry is fixed.
      ready: () => notes.freeze(),
    };
  },
});

export default notesPlugin;
