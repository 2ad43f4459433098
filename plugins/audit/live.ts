import { setTimeout as sleep } from 'node:timers/promises';
import { Types } from 'mongoose';
import type { Filter } from '../../core/access.ts';
import { entryView, type AuditEntryModel, type AuditEntryRecord, type AuditEntryView } from './model.ts';

export interface AuditTailOptions {
  pollMs: number;
  /** How far back each poll looks again for entries written late (the relay's batches, other processes). */
  lookbackMs: number;
}

/**
 * New audit entries matching `filterNow()` (the audit list's filter for the actor as it is now,
 * `AuditService.filterOf`: a caller who lost the right to list the log gets its 403) as they are written: polls by `_id` (time-ordered) from a look-back window, with a seen-set so
 * an entry a relay wrote late is not skipped. Entries recorded before the call are not sent.
 */
export async function* newAuditEntries(model: AuditEntryModel, filterNow: () => Filter, opts: AuditTailOptions, signal: AbortSignal): AsyncGenerator<AuditEntryView> {
  const since = new Date();
  const seen = new Map<string, number>();
  while (!signal.aborted) {
    const floor = Date.now() - opts.lookbackMs;
    const filter = filterNow();
    const rows = await model
      .find({ $and: [filter, { _id: { $gte: Types.ObjectId.createFromTime(Math.floor(floor / 1000)) } }] })
      .sort({ _id: 1 })
      .limit(1000)
      .lean<AuditEntryRecord[]>();
    for (const r of rows) {
      const id = String(r._id);
      if (seen.has(id)) continue;
      seen.set(id, r._id.getTimestamp().getTime());
      if (r.created_at >= since) yield entryView(r);
    }
    for (const [id, at] of seen) if (at < floor - 1000) seen.delete(id);
    await sleep(opts.pollMs, undefined, { signal }).catch(() => undefined);
  }
}
