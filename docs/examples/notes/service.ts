/**
 * The logic of the notes plugin. No Koa or GraphQL here: REST routes, GraphQL resolvers and the
 * job all call this service with an actor, and the actor alone decides the tenant.
 */
import { Types } from 'mongoose';
import { ValidationError } from '../../../core/errors.ts';
import { PluginError } from '../../../core/plugin.ts';
import { isSystemActor, writeTenantId, type Actor } from '../../../core/context.ts';
import type { Permissions } from '../../../core/permissions.ts';
import { pageOf } from '../../../lib/page.ts';
import type { Doc, HookBus } from '../../../core/hooks.ts';
import { OUTBOX_FIELD, type OutboxSource } from '../../../plugins/events/public/outbox.ts';
import type { Tenancy } from '../../../core/tenancy.ts';
import type { Services } from '../../../core/services.ts';
import type { NoteModel, NoteRecord } from './model.ts';
import type { ArchiveNotesInput, CreateNoteInput, ListNotesQuery, NotesPage, NoteView } from './schemas.ts';

/**
 * The hook of the notes plugin, typed for every handler by declaration merging: it runs inside the
 * request, before the write. What happens after a note is stored is its `note.created` event.
 */
declare module '../../../core/hooks.ts' {
  interface HookEvents {
    /** Before a note is stored: return a changed `data` (defaults) or throw an `AppError` to veto. */
    BEFORE_NOTE_CREATE: { actor: Actor; tenant_id: string; data: CreateNoteInput };
  }
}

/** The event a stored note makes (declared in the plugin's `eventTypes`). */
export const NOTE_CREATED = 'note.created';

/** Turns a note into text; registered by other plugins under a name clients pass as `format`. */
export type NoteFormatter = (note: Omit<NoteView, 'formatted'>) => string;

/** What other plugins get from `services.get('notes')`. */
export interface NotesApi {
  /**
   * Register a formatter. Call it from your plugin's `setup()` with `dependsOn: ['notes']`.
   * @throws PluginError for a taken name, or once the app has started
   * @example services.get('notes').registerFormatter('shout', (n) => n.title.toUpperCase())
   */
  registerFormatter(name: string, formatter: NoteFormatter): void;
  list(actor: Actor, q: ListNotesQuery): Promise<NotesPage>;
  create(actor: Actor, input: CreateNoteInput): Promise<NoteView>;
}

/** What the service needs from the app, given by `setup()`. */
export interface NotesServiceDeps {
  model: NoteModel;
  hooks: HookBus;
  /** The event log: a new note's `note.created` goes into its outbox, written by the same insert. */
  events: Pick<Services['events'], 'stage' | 'committed'>;
  /** `ctx.tenancy`: the tenant term of every filter (and none when `MULTI_TENANT_ENABLED` is off). */
  tenancy: Tenancy;
}

const view = (n: NoteRecord): Omit<NoteView, 'formatted'> => ({
  id: String(n._id),
  title: n.title,
  body: n.body ?? '',
  archived: n.archived ?? false,
  tenant_id: String(n.tenant_id),
  created_by: n.created_by ? String(n.created_by) : null,
  created_at: n.created_at.toISOString(),
});

/**
 * Who may call each operation: declared once, here beside the methods, and read by the REST route
 * (`auth`) and the GraphQL field (`t.withAuth(scopes(...))`). The methods then get a non-null actor
 * and keep only the rules about data (the tenant scope).
 */
export const NOTES_PERMISSIONS = { list: 'user', create: 'user', archiveOlderThan: 'admin' } as const satisfies Permissions;

export class NotesService implements NotesApi {
  private readonly formatters = new Map<string, NoteFormatter>();
  private frozen = false;

  private readonly model: NoteModel;
  private readonly hooks: HookBus;
  private readonly events: NotesServiceDeps['events'];
  private readonly tenancy: Tenancy;
  /** `notes` as an outbox source of the event log (`setup()` registers it, so the sweep finds left-behind entries). */
  readonly source: OutboxSource;

  constructor(deps: NotesServiceDeps) {
    ({ model: this.model, hooks: this.hooks, events: this.events, tenancy: this.tenancy } = deps);
    this.source = { name: 'notes', model: this.model, view: (d) => view(d as unknown as NoteRecord) as unknown as Doc };
  }

  registerFormatter(name: string, formatter: NoteFormatter): void {
    if (this.frozen) throw new PluginError(`Formatter "${name}" registered after start-up: register it in setup()`);
    if (this.formatters.has(name)) throw new PluginError(`Formatter "${name}" is already registered`);
    this.formatters.set(name, formatter);
  }

  /** Called from `ready()`: the registry is fixed once every plugin is set up. */
  freeze(): void {
    this.frozen = true;
  }

  formatterNames(): string[] {
    return [...this.formatters.keys()];
  }

  /** The caller's notes, newest first. Scope comes from the actor: a tenant user sees its tenant only. */
  async list(actor: Actor, q: ListNotesQuery): Promise<NotesPage> {
    const formatter = this.formatter(q.format);
    const filter = { ...this.tenancy.filter(actor), ...(q.archived === undefined ? {} : { archived: q.archived }) };
    const [rows, total] = await Promise.all([
      this.model.find(filter).sort({ created_at: -1, _id: -1 }).skip((q.page - 1) * q.per_page).limit(q.per_page).lean<NoteRecord[]>(),
      this.model.countDocuments(filter),
    ]);
    const items = rows.map((r) => {
      const v = view(r);
      return { ...v, formatted: formatter ? formatter(v) : null };
    });
    return pageOf(items, total, q);
  }

  /**
   * Stores a note in the actor's tenant (`systemActor(tenantId)` for a job; `systemActor()` alone
   * has no tenant and throws). `BEFORE_NOTE_CREATE` may change or veto it. The insert carries the
   * `note.created` event in the note's outbox: the event exists if and only if the note does.
   */
  async create(actor: Actor, input: CreateNoteInput): Promise<NoteView> {
    const tenantId = writeTenantId(actor);
    const ev = await this.hooks.runBefore('BEFORE_NOTE_CREATE', { actor, tenant_id: tenantId, data: input });
    const fields = {
      ...ev.data,
      _id: new Types.ObjectId(),
      tenant_id: new Types.ObjectId(tenantId),
      created_by: isSystemActor(actor) ? null : new Types.ObjectId(actor.id),
      created_at: new Date(),
      archived: false,
    };
    // The entry carries the note as created (`data`): archiving changes notes without an event of its own.
    const entry = { ...this.events.stage(NOTE_CREATED, { actor, tenant_id: tenantId }), data: view(fields as NoteRecord) as unknown as Doc };
    const doc = await this.model.create({ ...fields, [OUTBOX_FIELD]: [entry] });
    const stored = doc.toObject() as NoteRecord;
    await this.events.committed(this.source, stored as unknown as Doc);
    return { ...view(stored), formatted: null };
  }

  /** How many of the actor's notes `archiveBatch` would archive: the total a job reports progress against. */
  countArchivable(actor: Actor, cutoff: Date): Promise<number> {
    return this.model.countDocuments({ ...this.tenancy.filter(actor), archived: false, created_at: { $lt: cutoff } });
  }

  /**
   * Archives every note of the actor's tenant older than `older_than_days`, now (the job does the
   * same in the background). Who may call it is declared in {@link NOTES_PERMISSIONS}.
   */
  async archiveOlderThan(actor: Actor, input: ArchiveNotesInput): Promise<{ archived: number }> {
    const cutoff = new Date(Date.now() - input.older_than_days * 86_400_000);
    const res = await this.model.updateMany({ ...this.tenancy.filter(actor), archived: false, created_at: { $lt: cutoff } }, { $set: { archived: true } });
    return { archived: res.modifiedCount };
  }

  /**
   * Archives up to `limit` of the actor's notes created before `cutoff`, oldest first, and returns
   * how many. `systemActor(tenantId)` (a per-tenant job's `ctx.actor`) confines it to that tenant.
   */
  async archiveBatch(actor: Actor, cutoff: Date, limit: number): Promise<number> {
    const filter = { ...this.tenancy.filter(actor), archived: false, created_at: { $lt: cutoff } };
    const batch = await this.model.find(filter, { _id: 1 }).sort({ created_at: 1, _id: 1 }).limit(limit).lean();
    if (!batch.length) return 0;
    const res = await this.model.updateMany({ ...filter, _id: { $in: batch.map((n) => n._id) } }, { $set: { archived: true } });
    return res.modifiedCount;
  }

  /** `listNotesQuery` already refused unknown names; this guards direct callers of the service. */
  private formatter(name: string | undefined): NoteFormatter | null {
    if (name === undefined) return null;
    const f = this.formatters.get(name);
    if (!f) throw new ValidationError([{ loc: ['format'], msg: `unknown format; one of: ${this.formatterNames().join(', ')}`, type: 'custom' }]);
    return f;
  }
}
