/**
 * The privacy service: consents, the right of access (export) and erasure requests, each in its
 * own module, over the personal-data declarations every plugin contributes
 * (`kernel.personalData()`): it never knows a plugin's collections. No Koa or GraphQL here.
 */
import type { OutboxSource } from '../events/public/outbox.ts';
import type { PrivacyModels } from './model.ts';
import { ConsentsService } from './consents.ts';
import { erasureItemSource } from './erasure-run.ts';
import { ErasureService } from './erasure.ts';
import { ExportService } from './export.ts';
import { PersonalData } from './personal-data.ts';
import type { PrivacyDeps } from './types.ts';

export type { PrivacySettings } from './personal-data.ts';
export type { PrivacyDeps, RunControl } from './types.ts';

/** What `services.get('privacy')` offers: one service per concern. */
export class PrivacyService {
  readonly consents: ConsentsService;
  readonly exports: ExportService;
  readonly erasures: ErasureService;
  /** The collections whose writes carry their events (the event log's sweep reads their outboxes). */
  readonly sources: OutboxSource[];
  private readonly personal: PersonalData;

  constructor(models: PrivacyModels, deps: PrivacyDeps) {
    this.personal = new PersonalData(deps.db, deps.identity.models, deps.declarations, deps.tenancy, deps.settings);
    this.consents = new ConsentsService(models, deps);
    this.exports = new ExportService(models, this.personal, deps.readAccess ?? (() => Promise.resolve(null)));
    this.erasures = new ErasureService(models, this.personal, deps, this.consents.changes);
    this.sources = [this.erasures.source, this.consents.source, erasureItemSource(models)];
  }

  /** @throws Error when a declaration names a model nobody registered (checked at start-up). */
  checkDeclarations(): void {
    this.personal.check();
  }
}
