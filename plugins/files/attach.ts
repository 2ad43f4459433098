/**
 * `file` fields of resources: what a referenced file must be (ready, of an accepted type, within
 * the field's size), and the variants the field declares, rendered when the file is attached.
 */
import type { Types } from 'mongoose';
// Types only: the contract the resources plugin calls.
import type { FileFieldRule, FileReferenceChecker } from '../resources/index.ts';
import type { Doc } from '../../core/hooks.ts';
import { typeAllowed } from './inspect.ts';
import { TRANSFORMABLE, type Transform } from './images.ts';
import type { FilesService } from './service.ts';

/** The transform of a declared variant (format: the original's when png or webp, else jpeg, as on-demand transforms). */
export function declaredTransform(spec: NonNullable<FileFieldRule['variants']>[string], original: string): Transform {
  const fallback = original === 'image/png' ? 'png' : original === 'image/webp' ? 'webp' : 'jpeg';
  return { width: spec.width ?? null, height: spec.height ?? null, fit: spec.fit ?? 'cover', format: spec.format ?? fallback };
}

/** The checker the files plugin gives the resources plugin. */
export function fileChecker(svc: FilesService): FileReferenceChecker {
  return {
    async check(_tenantId: string | null, id: Types.ObjectId, rule: FileFieldRule) {
      // The reference check already found the file in the actor's scope and the document's tenant.
      const file = (await svc.collection().findOne({ _id: id, is_deleted: false })) as Doc | null;
      if (!file) return { msg: 'No files document with this id', type: 'reference_not_found' };
      if (file.status !== 'ready') return { msg: `The file is not ready (status ${String(file.status)})`, type: 'file_not_ready' };
      const type = String(file.content_type);
      if (rule.accept?.length && !typeAllowed(type, rule.accept)) return { msg: `The file's type ${type} is not accepted (accepted: ${rule.accept.join(', ')})`, type: 'file_type_not_accepted' };
      if (rule.max_bytes !== undefined && (file.size as number) > rule.max_bytes) return { msg: `The file is larger than ${rule.max_bytes} bytes`, type: 'file_too_large' };
      const variants = (file.variants as Record<string, unknown> | undefined) ?? {};
      if (rule.variants && TRANSFORMABLE.has(type)) {
        for (const [name, spec] of Object.entries(rule.variants)) if (!variants[name]) await svc.storeVariant(file, name, declaredTransform(spec, type));
      }
      return null;
    },
  };
}
