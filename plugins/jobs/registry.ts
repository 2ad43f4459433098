import { z } from 'zod';
import type { JobDefinition } from '../../core/plugin.ts';
import type { ParamInfo } from './schemas.ts';

/** A registered job with its defaults applied (description '', timeout 3600 s, max_attempts 3). */
export interface RegisteredJob {
  name: string;
  plugin: string;
  description: string;
  timeout: number;
  max_attempts: number;
  per_tenant: boolean;
  schema: z.ZodType<Record<string, unknown>>;
  params: Record<string, ParamInfo>;
  run: JobDefinition['run'];
}

const DEFAULT_PARAMS = z.object({}).passthrough();

interface JsonSchemaProp {
  type?: string | string[];
  description?: string;
  enum?: unknown[];
  const?: unknown;
  anyOf?: JsonSchemaProp[];
  format?: string;
}

/** The registry's `params` map (`{type, required, description, enum?}`), derived from the job's zod schema through its JSON Schema. */
export function paramsMap(schema: z.ZodType): Record<string, ParamInfo> {
  let js: { properties?: Record<string, JsonSchemaProp>; required?: string[] };
  try {
    js = z.toJSONSchema(schema, { unrepresentable: 'any', io: 'input' }) as typeof js;
  } catch {
    return {};
  }
  const required = new Set(js.required ?? []);
  return Object.fromEntries(
    Object.entries(js.properties ?? {}).map(([name, p]) => {
      const variants = p.anyOf?.filter((v) => v.type !== 'null') ?? [p];
      const main = variants[0] ?? p;
      const type = Array.isArray(main.type) ? main.type.filter((t) => t !== 'null').join('|') : (main.type ?? (main.enum ? typeof main.enum[0] : 'any'));
      const info: ParamInfo = { type, required: required.has(name), description: p.description ?? main.description ?? '' };
      if (main.enum) info.enum = main.enum;
      return [name, info];
    }),
  );
}

export function registerJob(def: JobDefinition & { plugin: string }): RegisteredJob {
  const schema = (def.params ?? DEFAULT_PARAMS) as z.ZodType<Record<string, unknown>>;
  return {
    name: def.name,
    plugin: def.plugin,
    description: def.description ?? '',
    timeout: def.timeout ?? 3600,
    max_attempts: def.max_attempts ?? 3,
    per_tenant: def.per_tenant ?? false,
    schema,
    params: paramsMap(schema),
    run: def.run,
  };
}

/** Registry entry: the primary `{name, description, timeout, max_attempts}` and the extended fields. */
export const registryView = (j: RegisteredJob) => ({
  name: j.name,
  description: j.description,
  timeout: j.timeout,
  max_attempts: j.max_attempts,
  params: j.params,
  per_tenant: j.per_tenant,
  timeout_seconds: j.timeout,
  retries: j.max_attempts - 1,
  plugin: j.plugin,
});
export type RegistryEntry = ReturnType<typeof registryView>;

/** The registered jobs by name, filled once every plugin is set up (`ready`). */
export class JobRegistry {
  private jobs = new Map<string, RegisteredJob>();

  set(jobs: RegisteredJob[]): void {
    this.jobs = new Map(jobs.map((j) => [j.name, j]));
  }

  get(name: string): RegisteredJob | undefined {
    return this.jobs.get(name);
  }

  has(name: string): boolean {
    return this.jobs.has(name);
  }

  all(): RegisteredJob[] {
    return [...this.jobs.values()];
  }
}
