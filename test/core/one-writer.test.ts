import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * One writer per collection with an outbox (docs/events.md, "One writer per outbox collection"): a
 * write to such a collection must stage its event in the same write and freeze the waiting entries
 * it supersedes, so only the module that owns the collection writes it. Checked on the source tree:
 * a production file outside the owners that imports the collection's model factory, calls a write
 * method on its model, or names its collection fails. Every schema that adds an outbox must have a
 * rule here, so a new outbox collection cannot be forgotten.
 */
const ROOT = resolve(import.meta.dirname, '../..');

const WRITE_METHODS = [
  'create', 'insertOne', 'insertMany', 'save', 'updateOne', 'updateMany', 'replaceOne', 'findOneAndUpdate', 'findByIdAndUpdate',
  'findOneAndReplace', 'findOneAndDelete', 'findByIdAndDelete', 'deleteOne', 'deleteMany', 'bulkWrite', 'updateIf', 'updateComputedIf', 'insert',
];

interface OutboxRule {
  /** The collections the rule covers. */
  collections: string[];
  /** The file whose schema adds the outbox. */
  schemaFile: string;
  /** Exported functions that build the models: importing one (as a value) is reaching the model. */
  factories: string[];
  /** Names the model is reached by in code (`models.User`, `this.Run`, `deps.endpoints`): a write method called on one is a write. */
  accessors: string[];
  /** Files (or folders, ending in `/`) that may write: the owners. */
  writers: string[];
  /** Files outside the owners that may still write, file → why. Keep it short. */
  exceptions?: Record<string, string>;
}

const RULES: OutboxRule[] = [
  {
    collections: ['tenants', 'users', 'api_keys'], schemaFile: 'plugins/identity/model.ts', factories: ['identityModels'], accessors: ['User', 'ApiKey', 'Tenant'],
    writers: ['plugins/identity/service.ts', 'plugins/identity/authentication.ts', 'plugins/identity/index.ts'],
    exceptions: {
      'plugins/identity/memberships.ts': "the start-up migration links each user to a person (`person_id`): a field outside the admin view, so no user's event or object changes",
      'plugins/privacy/erasure-run.ts': "pseudonymises the account last, after scrubbing its events: identity's entries carry their own object, so a write without one cannot change another event's",
    },
  },
  { collections: ['invitations'], schemaFile: 'plugins/invitations/model.ts', factories: ['invitationModel'], accessors: ['Invitation'], writers: ['plugins/invitations/service.ts', 'plugins/invitations/index.ts'] },
  { collections: ['roles'], schemaFile: 'plugins/access/model.ts', factories: ['roleModel'], accessors: ['Role'], writers: ['plugins/access/roles.ts', 'plugins/access/index.ts'] },
  {
    collections: ['sso_providers', 'sso_sign_ins'], schemaFile: 'plugins/sso/model.ts', factories: ['ssoModels'], accessors: ['Provider', 'SignIn'],
    writers: ['plugins/sso/providers.ts', 'plugins/sso/service.ts', 'plugins/sso/index.ts'],
  },
  { collections: ['job_runs'], schemaFile: 'plugins/jobs/model.ts', factories: ['jobModels'], accessors: ['Run'], writers: ['plugins/jobs/store.ts', 'plugins/jobs/index.ts'] },
  // Schedules and chains: each administrative write carries its `job_schedule.*` / `job_chain.*` event.
  { collections: ['job_schedules'], schemaFile: 'plugins/jobs/model.ts', factories: ['jobModels'], accessors: ['Schedule'], writers: ['plugins/jobs/schedules.ts', 'plugins/jobs/index.ts'] },
  { collections: ['job_chains'], schemaFile: 'plugins/jobs/model.ts', factories: ['jobModels'], accessors: ['Chain'], writers: ['plugins/jobs/chains.ts', 'plugins/jobs/index.ts'] },
  {
    collections: ['webhook_events', 'webhook_deliveries'], schemaFile: 'plugins/webhooks/model.ts',
    factories: ['webhookEventModel', 'webhookDeliveryModel'], accessors: ['deliveries', 'WebhookEvent'],
    writers: ['plugins/webhooks/service.ts', 'plugins/webhooks/endpoints.ts', 'plugins/webhooks/delivery.ts', 'plugins/webhooks/recorder.ts', 'plugins/webhooks/index.ts', 'plugins/webhooks/outbound.ts'],
  },
  {
    // Endpoints: the endpoint service alone writes them (an administrator's change carries its `webhook_endpoint.*` event).
    collections: ['webhook_endpoints'], schemaFile: 'plugins/webhooks/model.ts', factories: ['webhookEndpointModel'], accessors: ['endpoints', 'endpointModel'],
    writers: ['plugins/webhooks/endpoints.ts', 'plugins/webhooks/index.ts', 'plugins/webhooks/outbound.ts'],
  },
  {
    collections: ['privacy_erasure_requests'], schemaFile: 'plugins/privacy/model.ts', factories: ['privacyModels'], accessors: ['ErasureRequest'],
    writers: ['plugins/privacy/erasure.ts', 'plugins/privacy/erasure-run.ts', 'plugins/privacy/index.ts'],
  },
  // Consents: a grant or revocation (by its user or by an erasure) carries its `consent.*` event.
  { collections: ['privacy_consents'], schemaFile: 'plugins/privacy/model.ts', factories: ['privacyModels'], accessors: ['Consent'], writers: ['plugins/privacy/consents.ts', 'plugins/privacy/erasure-run.ts', 'plugins/privacy/index.ts'] },
  // An erasure's ledger: the write marking an item handled carries its `erasure.item_recorded` event.
  { collections: ['privacy_erasure_items'], schemaFile: 'plugins/privacy/model.ts', factories: ['privacyModels'], accessors: ['ErasureItem'], writers: ['plugins/privacy/erasure-run.ts', 'plugins/privacy/erasure.ts', 'plugins/privacy/index.ts'] },
  {
    // Every resource's collection: written by the resources plugin, the payments resource by the payments
    // store, and the files resource (list and get generated, no generated writes) by the files service.
    collections: ['payments', 'files'], schemaFile: 'plugins/resources/define.ts', factories: [], accessors: ['resource.model', 'payments.model', 'store.model', 'svc.model', 'child.model', 'plain'],
    writers: ['plugins/resources/', 'plugins/payments/store.ts', 'plugins/payments/payouts.ts', 'plugins/files/service.ts'],
    exceptions: { 'plugins/payments/refunds.ts': 'releases a refund reservation: bookkeeping counters of the payment, no transition and no event of its own' },
  },
];

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/** Source without comments, so an `@example` in JSDoc is not taken for code. */
const code = (text: string) => text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
const owns = (list: readonly string[], file: string) => list.some((w) => (w.endsWith('/') ? file.startsWith(w) : file === w));

/** The writes and model imports of outbox collections outside their owners, as `file: what`. */
function violations(files: Record<string, string>, rules: readonly OutboxRule[] = RULES): string[] {
  const out: string[] = [];
  for (const [file, text] of Object.entries(files)) {
    const src = code(text);
    for (const rule of rules) {
      if (owns(rule.writers, file) || rule.exceptions?.[file]) continue;
      for (const f of rule.factories) {
        if (new RegExp(`import\\s+\\{[^}]*\\b${f}\\b[^}]*\\}\\s+from`).test(src) && !new RegExp(`import\\s+type\\s+\\{[^}]*\\b${f}\\b`).test(src)) out.push(`${file}: imports ${f}`);
      }
      for (const a of rule.accessors) {
        const m = new RegExp(`(?:^|[^\\w.]|\\.)${escape(a)}(?:\\.collection)?\\.(${WRITE_METHODS.join('|')})\\(`, 'm').exec(src);
        if (m) out.push(`${file}: ${a}.${m[1]}()`);
      }
      for (const c of rule.collections) {
        if (new RegExp(`collection\\(\\s*['"\`]${escape(c)}['"\`]`).test(src)) out.push(`${file}: collection('${c}')`);
      }
    }
  }
  return out;
}

function tsFiles(dir: string): string[] {
  const abs = join(ROOT, dir);
  if (!existsSync(abs)) return [];
  if (statSync(abs).isFile()) return dir.endsWith('.ts') ? [dir] : [];
  return readdirSync(abs, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? tsFiles(join(dir, e.name)) : e.name.endsWith('.ts') && !e.name.startsWith('__lint_probe_') ? [join(dir, e.name)] : [],
  );
}

const production = () => Object.fromEntries(['core', 'lib', 'plugins', 'config', 'server.ts'].flatMap(tsFiles).map((f) => [f, readFileSync(join(ROOT, f), 'utf8')]));

describe('one writer per outbox collection', () => {
  it('no production file outside the owners writes an outbox collection', () => {
    expect(violations(production())).toEqual([]);
  });

  it('every schema that adds an outbox has a rule', () => {
    const withOutbox = Object.entries(production())
      .filter(([, text]) => /\.\.\.outboxPath\b|\.add\(outboxPath\)/.test(code(text)))
      .map(([f]) => f);
    expect(withOutbox.length).toBeGreaterThan(0);
    expect(withOutbox.filter((f) => !RULES.some((r) => r.schemaFile === f))).toEqual([]);
  });

  it('every exception names a file that exists and still needs it', () => {
    const tree = production();
    for (const rule of RULES) {
      for (const file of Object.keys(rule.exceptions ?? {})) {
        expect(tree[file], file).toBeDefined();
        const { [file]: _kept, ...others } = rule.exceptions!;
        expect(violations({ [file]: tree[file]! }, [{ ...rule, exceptions: others }]), `${file} no longer needs its exception`).not.toEqual([]);
      }
    }
  });

  it('fails on planted violations (in memory, never in the tree)', () => {
    const planted = {
      'plugins/rogue/service.ts': "import { identityModels } from '../../plugins/identity/model.ts';\nexport const f = (m) => m.User.updateOne({}, { $set: { name: 'x' } });",
      'plugins/rogue/runs.ts': "export const g = (db) => db.collection('job_runs').insertOne({});",
      'plugins/rogue/keys.ts': 'export const h = (models) => models.ApiKey.collection.findOneAndUpdate({}, {});',
      'plugins/rogue/notes.ts': 'export const k = (svc) => svc.plain.updateIf({}, true, {}, {});',
      'plugins/rogue/clean.ts': "import type { identityModels } from '../../plugins/identity/model.ts';\n// models.User.updateOne() in a comment\nexport const r = (m) => m.User.findOne({});",
      'plugins/jobs/delivery.ts': "export const s = (m) => m.Schedule.deleteOne({});\nexport const c = (m) => m.Chain.findOneAndUpdate({}, {});",
      'plugins/webhooks/delivery.ts': "export const e = (deps) => deps.endpoints.updateOne({}, { $set: { enabled: false } });",
    };
    expect(violations(planted).sort()).toEqual([
      'plugins/jobs/delivery.ts: Chain.findOneAndUpdate()',
      'plugins/jobs/delivery.ts: Schedule.deleteOne()',
      'plugins/rogue/keys.ts: ApiKey.findOneAndUpdate()',
      'plugins/rogue/notes.ts: plain.updateIf()',
      "plugins/rogue/runs.ts: collection('job_runs')",
      'plugins/rogue/service.ts: User.updateOne()',
      'plugins/rogue/service.ts: imports identityModels',
      'plugins/webhooks/delivery.ts: endpoints.updateOne()',
    ]);
    // The same write inside an owner is not a violation.
    expect(violations({ 'plugins/identity/service.ts': planted['plugins/rogue/service.ts'] })).toEqual([]);
  });
});
