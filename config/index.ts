import { z } from 'zod';

/** The placeholder `CURSOR_HMAC_SECRET` the project ships with (spec, document 1, cursor rule 5). */
export const PLACEHOLDER_CURSOR_SECRET = 'change-me-cursor-hmac-secret-placeholder-000000';
/** The placeholder `TOKEN_SECRET` the project ships with. */
export const PLACEHOLDER_TOKEN_SECRET = 'change-me-token-secret-placeholder-0000000000000';

const bool = (def: boolean) =>
  z
    .enum(['true', 'false', '1', '0', 'yes', 'no'], { message: 'must be true or false' })
    .default(def ? 'true' : 'false')
    .transform((v) => v === 'true' || v === '1' || v === 'yes');

const int = (def: number, min = 0) => z.coerce.number().int().min(min).default(def);

const csv = z
  .string()
  .default('')
  .transform((s) =>
    s
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean),
  );

/** One entry of `WEBHOOK_PROVIDERS` (the webhooks plugin validates the rest at registration). */
export const webhookProviderSetting = z
  .object({
    name: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, 'must be lowercase letters, digits, - or _'),
    verifier: z.union([
      z.object({ type: z.enum(['hmac-sha256', 'hmac-sha512']), prefix: z.string().optional(), encoding: z.enum(['hex', 'base64']).optional() }).strict(),
      z.object({ type: z.enum(['stripe', 'standard-webhooks', 'github']) }).strict(),
    ]),
    secret_env: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name'),
    event_id_path: z.string().min(1).optional(),
    event_type_path: z.string().min(1).optional(),
    event_id_header: z.string().min(1).optional(),
    event_type_header: z.string().min(1).optional(),
    signature_header: z.string().min(1).optional(),
    delivery_id_header: z.string().min(1).optional(),
    max_retries: z.number().int().min(0).max(100).optional(),
  })
  .strict();

/**
 * Every setting the server reads. `config/` is the only place that touches `process.env`.
 * Names are the environment variable names; the README's configuration table lists them.
 */
export const configSchema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  /** @default 3000 */
  PORT: int(3000).pipe(z.number().max(65535)),
  HOST: z.string().default('0.0.0.0'),
  /** Without it, an embedded MongoDB (mongodb-memory-server) keeps its data under `DATA_DIR`. */
  MONGODB_URI: z.string().url().optional(),
  /** @default '.data' */
  DATA_DIR: z.string().default('.data'),
  /** Port of the embedded MongoDB; 0 picks a free one. @default 0 */
  EMBEDDED_DB_PORT: int(0),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),

  /** Signs cursor tokens (HMAC-SHA256). Changing it invalidates every outstanding cursor. */
  CURSOR_HMAC_SECRET: z.string().min(1).default(PLACEHOLDER_CURSOR_SECRET),
  /** Signs bearer tokens (HS256 JWTs). */
  TOKEN_SECRET: z.string().min(1).default(PLACEHOLDER_TOKEN_SECRET),
  /** Lifetime of a bearer token issued by `POST /auth/token`. @default 3600 */
  TOKEN_TTL_SECONDS: int(3600, 60),
  /** How long a resolved credential is cached in process (0 disables). Revocation in this process is immediate. @default 5000 */
  AUTH_CACHE_TTL_MS: int(5000),
  /** When set, start-up ensures a system tenant + system admin authenticated by this key. */
  ADMIN_API_KEY: z.string().min(16, 'must be at least 16 characters').optional(),
  ADMIN_EMAIL: z.string().email().default('admin@system.local'),

  /** Server-side time limit (maxTimeMS) of list and count queries; bounds expensive filters. @default 10000 */
  QUERY_TIMEOUT_MS: int(10000, 1),
  /** @default 5000 */
  HEALTH_CHECK_TIMEOUT_MS: int(5000, 1),
  /** @default true */
  MULTI_TENANT_ENABLED: bool(true),
  /** @default true */
  AUDIT_LOG_ENABLED: bool(true),
  /** Advisory only: the spec says nothing purges on it; it is the default of the retention endpoint. @default 90 */
  AUDIT_LOG_RETENTION_DAYS: int(90, 1),
  /** Retention of the `cleanup_audit_log` job. @default 365 */
  JOBS_AUDIT_RETENTION_DAYS: int(365, 1),
  /** @default false */
  WEBHOOKS_ENABLED: bool(false),
  /** Default `retention_days` of `DELETE /webhooks/events/purge` (only `processed` events are purged). @default 90 */
  WEBHOOK_EVENT_RETENTION_DAYS: int(90, 1),
  /**
   * Webhook providers declared without code, as a JSON array; each emits the `WEBHOOK_RECEIVED`
   * hook. The secret is named by `secret_env` (an environment variable) and resolved here.
   * @example [{"name":"acme","verifier":{"type":"hmac-sha256","prefix":"sha256="},"secret_env":"ACME_WEBHOOK_SECRET","event_id_path":"id"}]
   */
  WEBHOOK_PROVIDERS: z
    .string()
    .default('[]')
    .transform((s, ctx) => {
      try {
        return JSON.parse(s) as unknown;
      } catch {
        ctx.addIssue({ code: 'custom', message: 'must be a JSON array' });
        return z.NEVER;
      }
    })
    .pipe(z.array(webhookProviderSetting)),
  /** @default false */
  JOBS_ENABLED: bool(false),
  /** Age after which `purge_soft_deleted` removes soft-deleted documents. @default 30 */
  SOFT_DELETE_RETENTION_DAYS: int(30, 1),

  WEBAUTHN_RP_ID: z.string().default('localhost'),
  WEBAUTHN_RP_NAME: z.string().default('Plugin API Server'),
  WEBAUTHN_ORIGIN: z.string().url().default('http://localhost:3000'),

  /** @default true */
  RATE_LIMIT_ENABLED: bool(true),
  /** Requests per window per credential (or per IP when anonymous). @default 1000 */
  RATE_LIMIT_MAX: int(1000, 1),
  /** @default 60 */
  RATE_LIMIT_WINDOW_SECONDS: int(60, 1),
  /** Failed authentications per client ip and window before credentials from it are refused (429). @default 100 */
  AUTH_FAILURE_LIMIT: int(100, 1),
  /** Largest accepted JSON body. @default '1mb' */
  BODY_LIMIT: z.string().regex(/^\d+(b|kb|mb)$/i, 'must look like 512kb or 1mb').default('1mb'),
  /** Trust `X-Forwarded-For` for the client ip (behind a proxy). @default false */
  TRUST_PROXY: bool(false),
  /** Time allowed for in-flight requests on SIGTERM/SIGINT. @default 10000 */
  SHUTDOWN_TIMEOUT_MS: int(10000, 0),

  /** Extra plugin modules (paths or package names), comma-separated; each exports a plugin object. */
  PLUGINS: csv,
  /** Names of built-in plugins to leave out, comma-separated. */
  DISABLED_PLUGINS: csv,
});

type ParsedConfig = z.infer<typeof configSchema>;
/** A `WEBHOOK_PROVIDERS` entry with its secret resolved from `secret_env`. */
export type WebhookProviderSetting = Omit<z.infer<typeof webhookProviderSetting>, 'secret_env'> & { secret: string };
export type Config = Omit<ParsedConfig, 'WEBHOOK_PROVIDERS'> & { WEBHOOK_PROVIDERS: WebhookProviderSetting[] };
export type ConfigInput = Partial<Record<keyof Config, string | undefined>>;

/** Raised for a bad setting; its message names every offending variable. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/**
 * Parse settings from an environment-like object.
 * @param env defaults to `process.env`; tests pass their own object.
 * @throws ConfigError naming each bad variable
 */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const picked: Record<string, string> = {};
  for (const key of Object.keys(configSchema.shape)) {
    const v = env[key];
    if (v !== undefined && v !== '') picked[key] = v;
  }
  const res = configSchema.safeParse(picked);
  if (!res.success) {
    const lines = res.error.issues.map((i) => `  ${String(i.path[0] ?? '?')}: ${i.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  const { WEBHOOK_PROVIDERS: providers, ...rest } = res.data;
  const secretProblems: string[] = [];
  const cfg: Config = {
    ...rest,
    WEBHOOK_PROVIDERS: providers.map(({ secret_env, ...p }) => {
      const secret = env[secret_env];
      if (!secret) secretProblems.push(`  WEBHOOK_PROVIDERS: provider "${p.name}" names secret_env ${secret_env}, which is not set`);
      return { ...p, secret: secret ?? '' };
    }),
  };
  if (secretProblems.length) throw new ConfigError(`Invalid configuration:\n${secretProblems.join('\n')}`);
  if (cfg.NODE_ENV === 'production') {
    const problems: string[] = [];
    const secrets: [string, string, string][] = [
      ['CURSOR_HMAC_SECRET', cfg.CURSOR_HMAC_SECRET, PLACEHOLDER_CURSOR_SECRET],
      ['TOKEN_SECRET', cfg.TOKEN_SECRET, PLACEHOLDER_TOKEN_SECRET],
    ];
    for (const [name, value, placeholder] of secrets) {
      if (value === placeholder) problems.push(`  ${name}: still the shipped placeholder; set a random value of at least 32 bytes`);
      else if (Buffer.byteLength(value) < 32) problems.push(`  ${name}: must be at least 32 bytes in production`);
    }
    if (problems.length) throw new ConfigError(`Invalid configuration:\n${problems.join('\n')}`);
  }
  return cfg;
}
