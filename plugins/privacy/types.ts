import type { Connection } from 'mongoose';
import type { IdentityService } from '../../core/identity/service.ts';
import type { Logger } from '../../core/logger.ts';
import type { JobRunContext, JobRunner, PersonalDataDeclaration } from '../../core/plugin.ts';
import type { EventLog } from '../../core/events/index.ts';
import type { Tenancy } from '../../core/tenancy.ts';
import type { AuditLogger } from '../audit/index.ts';
import type { PrivacySettings } from './personal-data.ts';

/* What the privacy service's modules share (service.ts, consents.ts, erasure.ts, erasure-run.ts). */

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
