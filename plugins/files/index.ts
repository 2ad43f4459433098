import { definePlugin } from '../../core/plugin.ts';
import { PluginError } from '../../core/plugin.ts';
// Types only: the declaration merging that gives `services.get('resources')` its type.
import type {} from '../resources/index.ts';
import { fileSchema, fileUploadModel, fileUsageModel } from './model.ts';
import { tusUploads } from './tus.ts';
import { purgeFiles } from './purge.ts';
import { MongoTusStore } from './tus-store.ts';
import { fileEventTypes } from './schemas.ts';
import { fileRoutes } from './routes.ts';
import { filesGraphql } from './graphql.ts';
import { FilesService, fileErrorCodes } from './service.ts';
import { StorageRegistry, type StorageAdapter } from './storage.ts';
import { gridfsAdapter } from './gridfs.ts';
import { s3Adapter } from './s3.ts';
import { signingKey } from './signing.ts';
import { fileChecker } from './attach.ts';
import { fileErasure, fileExportView } from './privacy.ts';

export type { StorageAdapter, ByteRange } from './storage.ts';

/** What other plugins get from `services.get('files')`. */
export interface FilesApi {
  /**
   * Adds a storage adapter (call it from your plugin's `setup()`, with `dependsOn: ['files']`);
   * `FILES_STORAGE=<name>` then stores new files with it.
   * @throws PluginError on a bad or duplicate name or a missing function
   */
  registerStorage(adapter: StorageAdapter): void;
  /** Names of the registered adapters. */
  storageNames(): string[];
}

declare module '../../core/services.ts' {
  interface Services {
    files: FilesApi;
  }
}

/**
 * Files: the storage registry (`gridfs` built in, `s3` when `FILES_S3_BUCKET` is set, others from
 * plugins), and with `FILES_ENABLED` the `files` resource (list, get), uploads, downloads, signed
 * URLs, `deleteFile` and the `file.uploaded` / `file.deleted` events. The `files` service exists
 * either way, so adapter plugins start in both modes.
 */
export const filesPlugin = definePlugin({
  name: 'files',
  enabledBy: 'FILES_ENABLED',
  dependsOn: ['resources'],
  setup({ db, config, services }) {
    const storage = new StorageRegistry();
    storage.add(gridfsAdapter(db, 'file_bytes'));
    if (config.FILES_S3_BUCKET) {
      const credentials = config.AWS_ACCESS_KEY_ID && config.AWS_SECRET_ACCESS_KEY
        ? { accessKeyId: config.AWS_ACCESS_KEY_ID, secretAccessKey: config.AWS_SECRET_ACCESS_KEY, sessionToken: config.AWS_SESSION_TOKEN }
        : undefined;
      storage.add(s3Adapter({ bucket: config.FILES_S3_BUCKET, region: config.FILES_S3_REGION, endpoint: config.FILES_S3_ENDPOINT, credentials }));
    }
    services.provide('files', { registerStorage: (a) => storage.add(a), storageNames: () => storage.names() });
    if (!config.FILES_ENABLED) return {};

    const resources = services.get('resources');
    const resource = resources.register({
      name: 'files',
      schema: fileSchema,
      // Created by uploads and deleted by the files service (its own events); list and get are the generated ones.
      operations: ['list', 'get'],
      searchable_fields: ['filename'],
      // In the uploader's export with a signed URL each (privacy.ts).
      export_view: fileExportView(() => svc),
    });
    const svc = new FilesService({ resource, events: services.get('events'), storage, usage: fileUsageModel(db) as never }, {
      storage: config.FILES_STORAGE,
      maxBytes: config.FILES_MAX_BYTES,
      quota: config.FILES_TENANT_QUOTA_BYTES,
      allowed: config.FILES_ALLOWED_TYPES,
      signingKey: signingKey(config.FILES_SIGNED_URL_SECRET, config.TOKEN_SECRET),
      signedUrlTtlSeconds: config.FILES_SIGNED_URL_TTL_SECONDS,
      transformAllowed: config.FILES_TRANSFORM_ALLOWED,
      maxPixels: config.FILES_MAX_PIXELS,
    });
    resources.setFileChecker(fileChecker(svc));
    const tus = tusUploads(svc, new MongoTusStore(db, fileUploadModel(db) as never, config.FILES_UPLOAD_EXPIRY_HOURS * 3_600_000), { maxBytes: config.FILES_MAX_BYTES });
    return {
      errorCodes: fileErrorCodes,
      routes: fileRoutes(svc, () => resources.documentSchema('files'), tus),
      jobs: [
        {
          name: 'files_cleanup_uploads',
          description: 'Removes resumable uploads not finished within FILES_UPLOAD_EXPIRY_HOURS, with their stored parts',
          timeout: 600,
          run: async () => ({ removed: await tus.cleanUpExpired() }),
        },
        {
          name: 'files_purge',
          description: 'Removes the bytes of files deleted more than FILES_PURGE_AFTER_DAYS ago, uploads a dead process left unfinished, stored bytes without a record; deletes records whose bytes are gone',
          timeout: 3600,
          run: () => purgeFiles(svc, storage, { purgeAfterDays: config.FILES_PURGE_AFTER_DAYS, staleUploadHours: config.FILES_UPLOAD_EXPIRY_HOURS }),
        },
      ],
      graphql: (builder) => filesGraphql(builder, svc),
      eventTypes: fileEventTypes(),
      personalData: [fileErasure(svc)],
      // Adapter plugins register in their own setup, which may run after this one.
      ready: () => {
        if (!storage.names().includes(config.FILES_STORAGE)) throw new PluginError(`FILES_STORAGE=${config.FILES_STORAGE}: no such storage adapter (registered: ${storage.names().join(', ')})`);
      },
    };
  },
});

export default filesPlugin;
