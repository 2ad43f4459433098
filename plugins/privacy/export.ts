/** The right of access: everything held about a user, as one streamed JSON document. No Koa or GraphQL here. */
import { Readable } from 'node:stream';
import { AccessDeniedError } from '../../core/errors.ts';
import { isAdmin, type Actor } from '../../core/context.ts';
import type { Permissions } from '../../core/permissions.ts';
import type { Doc } from '../../core/hooks.ts';
import { consentView, type ConsentRecord, type PrivacyModels } from './model.ts';
import { omit, type PersonalData } from './personal-data.ts';
import type { PrivacyDeps } from './types.ts';

/** The download `exportData` answers: a stream of one JSON object, with its file name. */
export interface PersonalDataExport {
  stream: Readable;
  filename: string;
  contentType: string;
}

/** Who may call the export: the one declaration its REST route and GraphQL field read (whose data: the service's rule). */
export const EXPORT_PERMISSIONS = { exportData: 'user' } as const satisfies Permissions;

export class ExportService {
  constructor(
    private readonly models: PrivacyModels,
    private readonly personal: PersonalData,
    private readonly readAccess: NonNullable<PrivacyDeps['readAccess']>,
  ) {}

  /**
   * `GET /privacy/users/{user_id}/export`: the user's account, consents and every document of every
   * declaration linked to them (soft-deleted ones included), minus each declaration's
   * `export_exclude` and in its `export_view`, as one JSON object streamed from database cursors
   * (memory does not grow with the data). The documents of a resource are read under the requesting
   * actor's read rules, as on `GET /<resource>`: its `rows` in the query, each document masked to
   * its fields; none when no role lets the actor read the resource.
   * @throws AccessDeniedError for a non-administrator asking for someone else; NotFoundError outside the actor's tenant scope
   */
  async exportData(actor: Actor, userId: string, opts: { origin?: string } = {}): Promise<PersonalDataExport> {
    if (actor.id !== userId && !isAdmin(actor)) throw new AccessDeniedError("Only administrators export other users' data");
    const personal = this.personal;
    const user = await personal.subjectFor(actor, userId);
    const declarations = await Promise.all(personal.linked().map(async (d) => ({ d, rule: await this.readAccess(actor, d.name) })));
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
      for (const { d, rule } of declarations) {
        yield `${first ? '' : ','}${JSON.stringify(d.name)}:[`;
        first = false;
        sep = '';
        const link = personal.linkFilter(d, user);
        const filter = rule && rule.rows ? { $and: [link, rule.rows] } : link;
        const docs = rule === false ? [] : personal.modelOf(d).find(filter).sort({ _id: 1 }).lean<Doc[]>().cursor({ batchSize: 500 });
        for await (const doc of docs) {
          const kept = omit(rule ? rule.mask(doc) : doc, d.export_exclude ?? []);
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
