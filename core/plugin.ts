import type { Connection } from 'mongoose';
import type { z } from 'zod';
import type { Config } from '../config/index.ts';
import type { HookBus, HookRegistration } from './hooks.ts';
import type { Logger } from './logger.ts';
import type { ServiceRegistry } from './services.ts';
import type { RouteDef } from './http/route.ts';
import type { Builder } from './graphql.ts';
import type { Actor } from './context.ts';
import type { Tenancy } from './tenancy.ts';
import type { GraphqlTransport } from './transport.ts';
import type { HealthCheck } from './health.ts';
import type { CatalogueEntry, ErrorCodes } from './errors.ts';

export type { HealthCheck };

export { PluginError } from './plugin-error.ts';

/**
 * A job function a plugin offers to the jobs plugin. The jobs plugin registers
 * every plugin's jobs when `JOBS_ENABLED` is on; without it they are simply not scheduled.
 *
 * @example
 * jobs: [{
 *   name: 'send_digest', description: 'Mail the daily digest', timeout: 600,
 *   params: z.object({ day: z.string().describe('YYYY-MM-DD') }),
 *   per_tenant: true,
 *   async run(ctx, params) { ctx.log(`digest for ${params.day}`); return { sent: 0 }; },
 * }]
 */
export interface JobDefinition<P extends z.ZodType<Record<string, unknown>> = z.ZodType<Record<string, unknown>>> {
  /** Unique across plugins, snake_case. */
  name: string;
  /** @default '' */
  description?: string;
  /** Seconds before the run is aborted and counted as a failed attempt. @default 3600 */
  timeout?: number;
  /** Total tries including the first. @default 3 */
  max_attempts?: number;
  /**
   * Parameters, validated before the run is queued (422 on failure). The registry derives its
   * `params` map (`{type, required, description, enum?}`) from this schema.
   * @default z.object({}).passthrough()
   */
  params?: P;
  /** Run once per enabled tenant, each as `systemActor(tenantId)`. @default false */
  per_tenant?: boolean;
  run(ctx: JobRunContext, params: z.output<P>): Promise<unknown>;
}

export interface JobRunContext {
  /** The job_runs id of this run. */
  run_id: string;
  /** 1 for the first try. */
  attempt: number;
  /** Aborted on cancel or timeout; a function that ignores it has its result discarded. */
  signal: AbortSignal;
  /** Who the job acts as: `systemActor(tenant_id)` for per-tenant runs, else `systemActor()`. */
  actor: Actor;
  /** The tenant of a per-tenant run (or of a run triggered for one tenant), else null. */
  tenant_id: string | null;
  log(line: string, level?: 'debug' | 'info' | 'warning' | 'error'): void;
  progress(current: number, total?: number | null, message?: string | null): void | Promise<void>;
}

/**
 * Personal data a plugin stores, declared so the privacy plugin can export and depersonalize it
 * without knowing the plugin. Collected by the kernel from every
 * plugin's `personalData` contribution.
 *
 * @example
 * personalData: [{ name: 'payments', model: 'Payment', subject_field: 'user_id', gdpr_fields: ['user_name'], retain: true }]
 */
export interface PersonalDataDeclaration {
  /** Unique label used in exports and erasure previews (a resource's name, `payments`...). */
  name: string;
  /** The mongoose model name registered on the app's connection. */
  model: string;
  /** The field holding the data subject's user id. @default 'created_by' */
  subject_field?: string;
  /** Fields holding personal data, replaced by neutral values on erasure. */
  gdpr_fields: string[];
  /** The field holding the tenant id (null when the collection is not tenant-scoped). @default 'tenant_id' */
  tenant_field?: string | null;
  /** Neutral value per field on erasure. @default null for every field */
  neutral?: Record<string, unknown>;
  /**
   * What erasure does with a linked document: `depersonalize` (keep it, neutralise `gdpr_fields`;
   * money records kept for legal retention) or `delete` (e.g. credentials).
   *
   * `account`: the record is the subject's account itself (`subject_field` is its `_id`; declared
   * by identity, at most one in an app: a second fails start-up). It is not one of the linked
   * collections: it is exported as the top-level `user` object (not under `collections`) and erased
   * after every other declaration and after the audit scrub, which reads its personal values
   * (its string `gdpr_fields`). Erasure revokes the account's API keys, disables it (identity stores
   * `user.disabled`, which credential plugins consume) and then pseudonymises the declared `gdpr_fields`
   * with per-user values: `email` becomes `erased-<user id>@<PRIVACY_ERASED_EMAIL_DOMAIN>` (unique,
   * as emails are unique per tenant), `name` becomes `PRIVACY_PSEUDONYM`, any other field its
   * `neutral` value (null by default).
   * @default 'depersonalize'
   */
  on_erasure?: 'depersonalize' | 'delete' | 'account' | 'scrub';
  /** Fields left out of the subject's export (secrets such as public keys or hashes). @default [] */
  export_exclude?: string[];
  /**
   * How a linked document appears in the subject's export, after `export_exclude` (e.g. a file
   * with a signed download URL). `origin` is the server's as the export's caller reached it ('' when unknown).
   */
  export_view?: (doc: Record<string, unknown>, ctx: { origin: string }) => Record<string, unknown> | Promise<Record<string, unknown>>;
  /**
   * Required with `on_erasure: 'scrub'`: a store of copies (stored answers, logs) whose records hold
   * the subject's values as opaque bytes, where no field can be neutralised or linked. Erasure calls
   * it once per execution, before the account is pseudonymised; it must be safe to call again. Such
   * a declaration is not exported and not previewed (its records copy what other collections hold).
   * @returns how many records it changed or removed
   */
  scrub?: (subject: ErasureSubject) => Promise<number>;
}

/** What an `on_erasure: 'scrub'` declaration is told about the subject of an erasure. */
export interface ErasureSubject {
  user_id: string;
  /** The subject's tenant; null when the search covers every tenant (a system-scope subject, or a single-tenant deployment). */
  tenant_id: string | null;
  /**
   * The subject's personal values (the account's email and name), each with what replaces it: the
   * value the erased account now holds (`erased-<id>@<domain>`, `PRIVACY_PSEUDONYM`). A string equal
   * to a value (case-insensitively, trimmed) is the subject's.
   */
  values: readonly { value: string; replacement: string }[];
}

/** What `setup()` returns. Every member is optional. */
export interface PluginContribution {
  /** REST routes, or a function evaluated once every plugin has run `setup()`. */
  routes?: RouteDef[] | (() => RouteDef[]);
  /** Adds this plugin's types and fields to the shared Pothos builder. */
  graphql?: (builder: Builder) => void;
  hooks?: HookRegistration[];
  /** Health checks by unique name (a duplicate name fails start-up). */
  health?: Record<string, HealthCheck>;
  jobs?: JobDefinition[];
  /** Personal data this plugin stores (see `PersonalDataDeclaration`); a function is evaluated after every `setup()`. */
  personalData?: PersonalDataDeclaration[] | (() => PersonalDataDeclaration[]);
  /**
   * Error codes this plugin's errors carry beyond the kernel's, each with an example `AppError` and
   * when a client meets it: they join the catalogue `/openapi.json` documents. A code the kernel or
   * another plugin declares fails start-up.
   */
  errorCodes?: ErrorCodes;
  /** Additions to the GraphQL pipeline: Yoga plugins, a transport on the HTTP server (see core/transport.ts). */
  transport?: GraphqlTransport;
  /** Called after every plugin's `setup()`, before the server listens. */
  ready?: () => void | Promise<void>;
  /** Called on shutdown, in reverse plugin order. */
  close?: () => void | Promise<void>;
}

/** What the kernel knows once every plugin is set up (routes of all plugins, job definitions). */
export interface KernelView {
  routes(): readonly (RouteDef & { plugin: string })[];
  jobs(): readonly (JobDefinition & { plugin: string })[];
  /** Every plugin's personal-data declarations (available once every plugin has run `setup()`). */
  personalData(): readonly (PersonalDataDeclaration & { plugin: string })[];
  /** Every error code a client can meet: the kernel's and those of the plugins that are on, by status. */
  errorCodes(): readonly CatalogueEntry[];
  /** Every loaded plugin, in set-up order (including those a setting keeps off). */
  plugins(): readonly string[];
  /** The loaded plugins that are on, and for each one that is off the setting that turns it on (`{ jobs: 'JOBS_ENABLED=true' }`). */
  pluginStates(): { on: string[]; off: Record<string, string> };
  /**
   * Every plugin's contribution, in set-up order (once every plugin has run `setup()`): how a plugin
   * collects a contribution it declares itself (by merging into `PluginContribution`), such as the
   * events plugin's `eventTypes`.
   */
  contributions(): readonly { plugin: string; contribution: PluginContribution }[];
}

/** Which of `plugins` are on under `config`, and the setting that turns on each of the others. */
export function pluginStates(plugins: readonly Plugin[], config: Config): { on: string[]; off: Record<string, string> } {
  const isOff = (p: Plugin) => p.enabledBy !== undefined && !config[p.enabledBy];
  return {
    on: plugins.filter((p) => !isOff(p)).map((p) => p.name),
    off: Object.fromEntries(plugins.filter(isOff).map((p) => [p.name, `${p.enabledBy}=true`])),
  };
}

export interface PluginContext<O = unknown> {
  name: string;
  options: O;
  config: Config;
  /** This app's database connection (one per app; models are registered on it). */
  db: Connection;
  hooks: HookBus;
  services: ServiceRegistry;
  /** The app's tenant policy (`MULTI_TENANT_ENABLED`): the one source of every tenant filter. */
  tenancy: Tenancy;
  log: Logger;
  kernel: KernelView;
}

/** A setting that is a boolean (`*_ENABLED`), as a plugin names the one that turns it on. */
export type BooleanSetting = { [K in keyof Config]-?: Config[K] extends boolean ? K : never }[keyof Config];

export interface Plugin<O = unknown> {
  readonly name: string;
  readonly dependsOn: readonly string[];
  /** The setting without which the plugin, though loaded, serves nothing (the start-up log lists it as off). */
  readonly enabledBy: BooleanSetting | undefined;
  readonly optionsSchema: z.ZodType<O> | undefined;
  /** Raw options, validated by the kernel with `optionsSchema` at start-up. */
  readonly rawOptions: unknown;
  setup(ctx: PluginContext<O>): PluginContribution | Promise<PluginContribution>;
  /** A copy of this plugin with other options. */
  configure(options: unknown): Plugin<O>;
}

export interface PluginSpec<S extends z.ZodType | undefined> {
  /** Unique, kebab-case. */
  name: string;
  /** Names of plugins that must be enabled and set up first. */
  dependsOn?: string[];
  /**
   * The boolean setting that turns the plugin on, when it has one; `setup()` still checks it (and
   * returns `{}` while it is off). The start-up log lists the plugin as off, naming the setting.
   */
  enabledBy?: BooleanSetting;
  options?: S;
  setup(ctx: PluginContext<S extends z.ZodType ? z.output<S> : undefined>): PluginContribution | Promise<PluginContribution>;
}

/**
 * Declare a plugin. The result is a plugin object: put it in `builtin-plugins.ts`, or export it
 * from a module named in `PLUGINS`.
 *
 * @example
 * export const helloPlugin = definePlugin({
 *   name: 'hello',
 *   options: z.object({ greeting: z.string().default('hi') }),
 *   setup: ({ options }) => ({ routes: [defineRoute({ method: 'GET', path: '/hello', auth: 'public', handler: () => ({ msg: options.greeting }) })] }),
 * });
 * // with options: helloPlugin.configure({ greeting: 'hey' })
 */
export function definePlugin<S extends z.ZodType | undefined = undefined>(spec: PluginSpec<S>): Plugin<S extends z.ZodType ? z.output<S> : undefined> {
  type O = S extends z.ZodType ? z.output<S> : undefined;
  const make = (rawOptions: unknown): Plugin<O> => ({
    name: spec.name,
    dependsOn: spec.dependsOn ?? [],
    enabledBy: spec.enabledBy,
    optionsSchema: spec.options as z.ZodType<O> | undefined,
    rawOptions,
    setup: spec.setup as Plugin<O>['setup'],
    configure: (o: unknown) => make(o),
  });
  return make(undefined);
}

export const isPlugin = (x: unknown): x is Plugin =>
  !!x && typeof x === 'object' && typeof (x as Plugin).name === 'string' && typeof (x as Plugin).setup === 'function';
