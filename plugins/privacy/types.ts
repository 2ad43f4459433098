import type { Connection } from 'mongoose';
import type { IdentityService } from '../identity/index.ts';
import type { Logger } from '../../core/logger.ts';
import type { JobRunContext, PersonalDataDeclaration } from '../../core/plugin.ts';
import type { JobRunner } from '../jobs/public/runner.ts';
import type { EventLog } from '../events/index.ts';
import type { Tenancy } from '../../core/tenancy.ts';
import type { AuditLogger } from '../audit/index.ts';
import type { ReadAccess } from '../access/index.ts';
import type { Actor } from '../../core/context.ts';
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
  /**
   * The read rule of `actor` on the resource a declaration names: null when no rule restricts it
   * (or the declaration is no resource), false when no role lets the actor read it. @default no rules
   */
  readAccess?: (actor: Actor, declaration: string) => Promise<ReadAccess | null | false>;
  log: Logger;
  settings: PrivacySettings;
}

/** Progress and cancellation of one execution (a job's run context, or nothing inline). */
export type RunControl = Partial<Pick<JobRunContext, 'progress' | 'signal'>>;
