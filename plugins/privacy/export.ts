/** The right of access: everything held about a user, as one streamed JSON document. No Koa or GraphQL here. */
import { Readable } from 'node:stream';
import { AccessDeniedError } from '../../core/errors.ts';
import { isAdmin, type Actor } from '../../core/context.ts';
import type { Doc } from '../../core/hooks.ts';
import { consentView, type ConsentRecord, type PrivacyModels } from './model.ts';
import { omit, type PersonalData } from './personal-data.ts';

/** The download `exportData` answers: a stream of one JSON object, with its file name. */
export interface PersonalDataExport {
  stream: Readable;
  filename: string;
  contentType: string;
}

export class ExportService {
  constructor(
    private readonly models: PrivacyModels,
    private readonly personal: PersonalData,
  ) {}

  /**
   * `GET /privacy/users/{user_id}/export`: the user's account, consents and every document of every
   * declaration linked to them (soft-deleted ones included), minus each declaration's
   * `export_exclude` and in its `export_view`, as one JSON object streamed from database cursors (memory does not grow with
   * the data).
   * @throws AccessDeniedError for a non-administrator asking for someone else; NotFoundError outside the actor's tenant scope
   */
  async exportData(actor: Actor, userId: string, opts: { origin?: string } = {}): Promise<PersonalDataExport> {
    if (actor.id !== userId && !isAdmin(actor)) throw new AccessDeniedError("Only administrators export other users' data");
    const personal = this.personal;
    const user = await personal.subjectFor(actor, userId);
    const declarations = personal.linked();
    const { Consent } = this.models;
    const account = {
      id: String(user._id), email: user.email, name: user.name, tenant_id: String(user.tenant_id), roles: user.roles, features: user.features,
      attributes: user.attributes ?? {}, is_active: user.is_active !== false, is_deleted: !!user.is_deleted, created_at: (user as { created_at?: Date }).created_at ?? null,
    };
    async function* body(): AsyncGenerator<string> {
      yield `{"generated_at":${JSON.stringify(new Date())},"user":${JSON.stringify(account)},"consents":[`;
      let sep = '';
      for await (const c of Consent.find({ user_id: user._id }).sort({ granted_at: 1, _id: 1 }).lean<ConsentRecord[]>().cursor()) {
        yield sep + JSON.stringify(consentView(c));
        sep = ',';
      }
      yield '],"collections":{';
      let first = true;
      for (const d of declarations) {
        yield `${first ? '' : ','}${JSON.stringify(d.name)}:[`;
        first = false;
        sep = '';
        for await (const doc of personal.modelOf(d).find(personal.linkFilter(d, user)).sort({ _id: 1 }).lean<Doc[]>().cursor({ batchSize: 500 })) {
          const kept = omit(doc, d.export_exclude ?? []);
          yield sep + JSON.stringify(d.export_view ? await d.export_view(kept, { origin: opts.origin ?? '' }) : kept);
          sep = ',';
        }
        yield ']';
      }
      yield '}}';
    }
    const stamp = new Date().toISOString().replace(/\.\d+Z$/, 'Z').replace(/:/g, '-');
    return { stream: Readable.from(body()), filename: `personal-data-${userId}-${stamp}.json`, contentType: 'application/json; charset=utf-8' };
  }
}
