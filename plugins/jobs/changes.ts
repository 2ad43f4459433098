/**
 * Schedules and chains are written by administrators: their creates, updates and deletes are
 * announced on the hook bus as document events (`job_schedules`, `job_chains`), the way resources
 * announce theirs, so the audit plugin records them without the jobs plugin knowing it.
 */
import type { Actor } from '../../core/context.ts';
import { documentEventBase, type Doc, type HookBus } from '../../core/hooks.ts';

type Written = { _id: unknown; tenant_id?: unknown };

const tenantOf = (d: Written): string | null => (d.tenant_id ? String(d.tenant_id) : null);

/** The document events of one collection's administrative writes. */
export class DocumentChanges {
  constructor(
    private readonly hooks: HookBus,
    private readonly resource: string,
  ) {}

  async created(actor: Actor, doc: Written): Promise<void> {
    await this.hooks.emitAfter('AFTER_CREATE', { ...documentEventBase(this.resource, actor, tenantOf(doc)), id: String(doc._id), doc: doc as Doc });
  }

  async updated(actor: Actor, old: Written, doc: Written): Promise<void> {
    await this.hooks.emitAfter('AFTER_UPDATE', { ...documentEventBase(this.resource, actor, tenantOf(doc)), id: String(doc._id), old: old as Doc, doc: doc as Doc, replace: false });
  }

  async deleted(actor: Actor, old: Written): Promise<void> {
    await this.hooks.emitAfter('AFTER_DELETE', { ...documentEventBase(this.resource, actor, tenantOf(old)), id: String(old._id), old: old as Doc, doc: old as Doc });
  }
}
