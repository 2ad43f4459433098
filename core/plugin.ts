import type { Connection } from 'mongoose';
import type { z } from 'zod';
import type { Config } from '../config/index.ts';
import type { HookBus, HookRegistration } from './hooks.ts';
import type { Logger } from './logger.ts';
import type { ServiceRegistry } from './services.ts';
import type { RouteDef } from './http/route.ts';
import type { Builder } from './graphql.ts';

/**
 * A health check: resolve (or return `true`) when healthy. Return `false` or throw a
 * `HealthCheckFailure` to report `failed`; any other exception reports `error`; exceeding
 * `HEALTH_CHECK_TIMEOUT_MS` reports `timeout`.
 */
export type HealthCheck = () => Promise<unknown> | unknown;

/** Start-up failure caused by the plugin list (missing dependency, cycle, bad options, duplicate health check...). */
export class PluginError extends Error {
  override name = 'PluginError';
}

/** A job function a plugin offers to the jobs plugin (spec document 3). */
export interface JobDefinition {
  name: string;
  /** @default '' */
  description?: string;
  /** Seconds before the run is killed. @default 3600 */
  timeout?: number;
  /** Total tries including the first. @default 3 */
  max_attempts?: number;
  run(ctx: JobRunContext, params: Record<string, unknown>): Promise<unknown>;
}

export interface JobRunContext {
  log(line: string): void;
  progress(current: number, total?: number | null, message?: string | null): void | Promise<void>;
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
  /** Called after every plugin's `setup()`, before the server listens. */
  ready?: () => void | Promise<void>;
  /** Called on shutdown, in reverse plugin order. */
  close?: () => void | Promise<void>;
}

/** What the kernel knows once every plugin is set up (routes of all plugins, job definitions). */
export interface KernelView {
  routes(): readonly (RouteDef & { plugin: string })[];
  jobs(): readonly (JobDefinition & { plugin: string })[];
  plugins(): readonly string[];
}

export interface PluginContext<O = unknown> {
  name: string;
  options: O;
  config: Config;
  /** This app's database connection (one per app; models are registered on it). */
  db: Connection;
  hooks: HookBus;
  services: ServiceRegistry;
  log: Logger;
  kernel: KernelView;
}

export interface Plugin<O = unknown> {
  readonly name: string;
  readonly dependsOn: readonly string[];
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
  options?: S;
  setup(ctx: PluginContext<S extends z.ZodType ? z.output<S> : undefined>): PluginContribution | Promise<PluginContribution>;
}

/**
 * Declare a plugin. The result is a plugin object: put it in `config/plugins.ts`, or export it
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
    optionsSchema: spec.options as z.ZodType<O> | undefined,
    rawOptions,
    setup: spec.setup as Plugin<O>['setup'],
    configure: (o: unknown) => make(o),
  });
  return make(undefined);
}

export const isPlugin = (x: unknown): x is Plugin =>
  !!x && typeof x === 'object' && typeof (x as Plugin).name === 'string' && typeof (x as Plugin).setup === 'function';
