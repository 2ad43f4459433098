/**
 * GraphQL of the files plugin. `files` and `file(id)` come from the resources fragment (type
 * `File`); this adds `deleteFile` and the signed `url` of a file, with the same rules as REST.
 * Uploads go through REST (`POST /files`) and tus.
 */
import type { Builder } from '../../core/graphql.ts';
import { scopes } from '../../core/graphql.ts';
import { FILE_PERMISSIONS, type FilesService } from './service.ts';
import { originOf } from './routes.ts';

export function filesGraphql(builder: Builder, svc: FilesService) {
  const File = 'File' as never;
  builder.objectField(File, 'url', (t) =>
    t.withAuth(scopes(FILE_PERMISSIONS.signedUrl)).string({
      nullable: true,
      description: 'A signed download URL (expires after FILES_SIGNED_URL_TTL_SECONDS); null unless the file is ready',
      resolve: async (f: { _id: unknown; status?: unknown }, _a, ctx) => {
        if (f.status !== 'ready') return null;
        return (await svc.signedUrl(ctx.actor, String(f._id), ctx.koa ? originOf(ctx.koa) : '')).url;
      },
    }) as never,
  );
  builder.mutationFields((t) => ({
    deleteFile: t.withAuth(scopes(FILE_PERMISSIONS.remove)).field({
      type: File, nullable: false, description: 'Same as DELETE /files/{id}: soft delete (status `deleted`)',
      args: { id: t.arg.id({ required: true }), if_match: t.arg.string() },
      resolve: (_r, args, ctx) => svc.remove(ctx.actor, String(args.id), args.if_match) as never,
    }),
  }));
}
