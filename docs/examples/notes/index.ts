/**
 * The notes plugin: the template every new plugin copies (docs/plugins.md). This file only wires:
 * the model (model.ts), the zod inputs (schemas.ts), the logic (service.ts) and the GraphQL
 * fragment (graphql.ts) come from their own files.
 */
import { definePlugin } from '../../../core/plugin.ts';
import { defineRoute } from '../../../core/http/route.ts';
import { systemActor } from '../../../core/context.ts';
import { noteModel } from './model.ts';
import { archiveJobParams, createNoteInput, listNotesQuery, noteView, notesOptions, notesPage } from './schemas.ts';
import { NotesService, type NotesApi } from './service.ts';
import { notesGraphQL } from './graphql.ts';

export type { NoteFormatter, NotesApi } from './service.ts';
export type { NoteView } from './schemas.ts';

declare module '../../../core/services.ts' {
  interface Services {
    notes: NotesApi;
  }
}

/**
 * Tenant-scoped notes: `GET/POST /notes`, GraphQL `notes` / `createNote`, events
 * `BEFORE_NOTE_CREATE` / `AFTER_NOTE_CREATE`, the job `archive_old_notes`, and a formatter registry
 * other plugins fill through `services.get('notes').registerFormatter()`.
 */
export const notesPlugin = definePlugin({
  name: 'notes',
  options: notesOptions,
  setup({ db, hooks, config, options, services }) {
    const notes = new NotesService(noteModel(db), hooks, { multiTenant: config.MULTI_TENANT_ENABLED });
    services.provide('notes', notes);
    const tags = ['notes'];
    const listQuery = listNotesQuery(options.default_per_page, () => notes.formatterNames());

    return {
      routes: [
        defineRoute({
          method: 'GET', path: '/notes', tags, summary: 'Notes of the caller\'s tenant, newest first',
          query: listQuery, response: notesPage,
          handler: ({ user, query }) => notes.list(user!, query),
        }),
        defineRoute({
          method: 'POST', path: '/notes', tags, status: 201, summary: 'Create a note in the caller\'s tenant',
          body: createNoteInput, response: noteView,
          handler: ({ user, body }) => notes.create(user!, body),
        }),
      ],
      graphql: (builder) => notesGraphQL(builder, notes, listQuery),
      jobs: [
        {
          name: 'archive_old_notes',
          description: 'Archive notes older than archive_after_days, tenant by tenant (params: tenant_id to run one tenant)',
          timeout: 600,
          async run(ctx, params) {
            const { tenant_id } = archiveJobParams.parse(params);
            const tenants = tenant_id ? [tenant_id] : await notes.tenantsWithNotes();
            let archived = 0;
            for (const [i, tenant] of tenants.entries()) {
              // No request here: the system actor of that one tenant is the caller, so the
              // service's tenant filter confines every write to it.
              const n = await notes.archiveOlderThan(systemActor(tenant), options.archive_after_days);
              archived += n;
              ctx.log(`tenant ${tenant}: archived ${n}`);
              await ctx.progress(i + 1, tenants.length);
            }
            return { tenants: tenants.length, archived };
          },
        },
      ],
      // Providers register in their setup(); after that the registry is fixed.
      ready: () => notes.freeze(),
    };
  },
});

export default notesPlugin;
