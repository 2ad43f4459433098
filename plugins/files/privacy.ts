/**
 * Files and the privacy plugin: a file's data subject is its uploader (`created_by`). Its export
 * lists the subject's files with signed URLs; its erasure removes them, bytes and record.
 */
import type { PersonalDataDeclaration } from '../../core/plugin.ts';
import type { FilesService } from './service.ts';

/** `export_view` of the files resource: each record with a signed `url` (null unless ready). */
export const fileExportView = (svc: () => FilesService): NonNullable<PersonalDataDeclaration['export_view']> => (doc, { origin }) => ({
  ...doc,
  url: doc.status === 'ready' && !doc.is_deleted ? svc().signUrl(String(doc._id), origin).url : null,
});

/**
 * The erasure of the subject's files. The files resource's own declaration exports them (nothing
 * in a record can be neutralised, the bytes are the personal data); this one, a scrub, deletes
 * them: bytes and variants at once, then the record, after a `file.deleted` and the referrers' rules.
 */
export const fileErasure = (svc: FilesService): PersonalDataDeclaration => ({
  name: 'file_bytes',
  model: svc.collection().collectionName,
  subject_field: 'created_by',
  gdpr_fields: [],
  on_erasure: 'scrub',
  scrub: ({ user_id, tenant_id }) => svc.eraseUploadsOf(user_id, tenant_id),
});
