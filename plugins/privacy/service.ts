/**
 * The privacy service: consents, the right of access (export) and erasure requests, each in its
 * own module, over the personal-data declarations every plugin contributes
 * (`kernel.personalData()`): it never knows a plugin's collections. No Koa or GraphQL here.
 */
import type { Connection } from 'mongoose';
import type { IdentityService } from '../../core/identity/service.ts';
import type { Logger } from '../../core/logger.ts';
import type { JobRunContext, JobRunner, PersonalDataDeclaration } from '../../core/plugin.ts';
import type { EventLog } from '../../core/events/index.ts';
import type { Tenancy } from '../../core/tenancy.ts';
import type { AuditLogger } from '../audit/index.ts';
import type { PrivacyModels } from './model.ts';
import { ConsentsService } from './consents.ts';
import { ErasureService } from './erasure.ts';
import { ExportService } from './export.ts';
import { PersonalData, type PrivacySettings } from './personal-data.ts';

export type { PrivacySettings } from './personal-data.ts';

export interface PrivacyDeps {
  db: Connection;
  identity: IdentityService;
  /** The event log: an erasure depersonalizes the events of the subject's documents too. */
  events: EventLog;
  /** The app's tenant policy: the tenant term of every read and write. */
  tenancy: Tenancy;
  /** Looked up per call: audit and jobs are optional plugins. */
  audit: () => AuditLogger | undefined;
  jobs: () => JobRunner | undefined;
  declarations: () => readonly PersonalDataDeclaration[];
  log: Logger;
  settings: PrivacySettings;
}

/** Progress and cancellation of one execution (a job's run context, or nothing inline). */
export type RunControl = Partial<Pick<JobRunContext, 'progress' | 'signal'>>;

/** What `services.get('privacy')` offers: one service per concern. */
export class PrivacyService {
  readonly consents: ConsentsService;
  readonly exports: ExportService;
  readonly erasures: ErasureService;
  private readonly personal: PersonalData;

  constructor(models: PrivacyModels, deps: PrivacyDeps) {
    this.personal = new PersonalData(deps.db, deps.declarations, deps.tenancy, deps.settings);
    this.consents = new ConsentsService(models, deps);
    this.exports = new ExportService(models, this.personal);
    this.erasures = new ErasureService(models, this.personal, deps);
  }

  /** @throws Error when a declaration names a model nobody registered (checked at start-up). */
  checkDeclarations(): void {
    this.personal.check();
  }
}
