import { z } from 'zod';
import { filesSettings } from './files.ts';
import { limitSettings } from './limits.ts';
import { observabilitySettings } from './observability.ts';
import { webauthnSettings } from './webauthn.ts';
import { bool, csv, int } from './fields.ts';

/**
 * The placeholder `CURSOR_HMAC_SECRET` earlier versions shipped as a default. It is public (anyone
 * could forge cursors with it), so it is refused in every mode.
 */
export const PLACEHOLDER_CURSOR_SECRET = 'change-me-cursor-hmac-secret-placeholder-000000';
/** The placeholder `TOKEN_SECRET` earlier versions shipped as a default; refused in every mode. */
export const PLACEHOLDER_TOKEN_SECRET = 'change-me-token-secret-placeholder-0000000000000';

/** Settings that sign things. Unset outside production, a generated secret kept under `DATA_DIR` stands in (config/secrets.ts). */
export const SECRET_SETTINGS = ['TOKEN_SECRET', 'CURSOR_HMAC_SECRET'] as const;
export type SecretSetting = (typeof SECRET_SETTINGS)[number];
const PLACEHOLDERS: Record<SecretSetting, string> = { TOKEN_SECRET: PLACEHOLDER_TOKEN_SECRET, CURSOR_HMAC_SECRET: PLACEHOLDER_CURSOR_SECRET };
/** Smallest secret accepted in production, and the size of generated ones. */
export const MIN_SECRET_BYTES = 32;


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
    timestamp_header: z.string().min(1).optional(),
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

  /**
   * Signs cursor tokens (HMAC-SHA256). Changing it invalidates every outstanding cursor.
   * Required in production; elsewhere a generated one is kept in `DATA_DIR/secrets.json`.
   */
  CURSOR_HMAC_SECRET: z.string().min(1).optional(),
  /**
   * Signs bearer tokens (HS256 JWTs). Required in production; elsewhere a generated one is kept
   * in `DATA_DIR/secrets.json`.
   */
  TOKEN_SECRET: z.string().min(1).optional(),
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
  /** Days the event log keeps an event (`GET /events`, stream resumes, durable consumers' look-back). @default 30 */
  EVENTS_RETENTION_DAYS: int(30, 1),
  /** How often durable consumers (and realtime tails) read the event log. @default 250 */
  EVENTS_POLL_INTERVAL_MS: int(250, 10),
  /** How often realtime streams (`GET /events/stream`, GraphQL over SSE) send a keep-alive comment. @default 15000 */
  REALTIME_KEEPALIVE_MS: int(15000, 10),
  /** Events one realtime subscriber may have waiting before its stream is ended (a client that does not read). @default 10000 */
  REALTIME_MAX_QUEUE: int(10000, 1),
  /**
   * How long the relay gathers this process's events before one bulk insert into the log; 0 = each
   * write waits until its event is in the log before answering (slower; tests use it). @default 50
   */
  EVENTS_RELAY_INTERVAL_MS: int(50, 0),
  /** @default true */
  MULTI_TENANT_ENABLED: bool(true),
  /** @default true */
  AUDIT_LOG_ENABLED: bool(true),
  /**
   * Advisory: nothing purges on it by itself; it is the default `retention_days` of
   * `DELETE /admin/audit-log/retention`. @default 90
   */
  AUDIT_LOG_RETENTION_DAYS: int(90, 1),
  /**
   * What the `cleanup_audit_log` job deletes (entries older than this). Kept apart from
   * `AUDIT_LOG_RETENTION_DAYS`: the scheduled job keeps a year by default, the manual purge 90 days. @default 365
   */
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
  // --- outbound webhooks (on with WEBHOOKS_ENABLED) ---
  /** Delays in seconds before each delivery attempt, comma-separated, one per attempt (the first counts from the event). */
  WEBHOOK_DELIVERY_RETRY_SCHEDULE: z
    .string()
    .default('0,5,300,1800,7200,18000,36000,36000')
    .transform((s, ctx) => {
      const parts = s.split(',').map((x) => x.trim());
      const nums = parts.map(Number);
      if (!parts.length || nums.some((n, i) => parts[i] === '' || !Number.isFinite(n) || n < 0)) {
        ctx.addIssue({ code: 'custom', message: 'must be comma-separated non-negative numbers of seconds, e.g. 0,5,300' });
        return z.NEVER;
      }
      return nums;
    }),
  /** A delivery attempt that has no 2xx answer within this many ms fails. @default 10000 */
  WEBHOOK_DELIVERY_TIMEOUT_MS: int(10_000, 1),
  /** How often every process looks for due deliveries. @default 500 */
  WEBHOOK_DELIVERY_POLL_INTERVAL_MS: int(500, 10),
  /** Outbound deliveries one process sends at once. @default 10 */
  WEBHOOK_DELIVERY_CONCURRENCY: int(10, 1),
  /**
   * Outbound deliveries of one endpoint one process sends at once: a slow or hanging endpoint holds
   * this many of the process's slots, never the others'. @default 2
   */
  WEBHOOK_DELIVERY_ENDPOINT_CONCURRENCY: int(2, 1),
  /** How long an endpoint may keep failing every attempt before it is disabled; fractions allowed (0.001 = 3.6 s). @default 120 */
  WEBHOOK_ENDPOINT_DISABLE_AFTER_HOURS: z.coerce.number().positive().default(120),
  /** How long deliveries stay signed with the previous secret too after a rotation. @default 86400 */
  WEBHOOK_SECRET_ROTATION_OVERLAP_SECONDS: int(86_400, 0),
  /** Host names or IPs (comma-separated) an endpoint may use although they are private, loopback and the like. @default '' */
  WEBHOOK_ENDPOINTS_ALLOWED_HOSTS: csv,
  /** @default false */
  JOBS_ENABLED: bool(false),
  /** Age after which `purge_soft_deleted` removes soft-deleted documents. @default 30 */
  SOFT_DELETE_RETENTION_DAYS: int(30, 1),
  /** Register the sample resources `/projects` and `/tasks` (when the resources plugin is given none). @default true unless NODE_ENV is production */
  SAMPLE_RESOURCES_ENABLED: z.enum(['true', 'false', '1', '0', 'yes', 'no']).optional().transform((v) => (v === undefined ? undefined : v === 'true' || v === '1' || v === 'yes')),
  // --- jobs ---
  /** `cleanup_job_runs` deletes finished job runs older than this. Formerly `JOBS_CLEANUP_DAYS`. @default 90 */
  JOB_RUN_RETENTION_DAYS: int(90, 1),
  /**
   * Lock ttl (a lock's `ttl_seconds`): a run whose holder stops renewing its lock (crash) is taken
   * over by another replica after this long. Holders renew it while they run. @default 3600
   */
  JOBS_LOCK_TTL_SECONDS: int(3600, 1),
  /** How often workers look for due work, running runs check for cancellation and SSE streams read new log lines. @default 1000 */
  JOBS_POLL_INTERVAL_MS: int(1000, 10),
  /** First wait before a retry; doubled for each further attempt, at most 60 s. @default 2000 */
  JOBS_RETRY_DELAY_MS: int(2000, 0),
  /** Runs one process executes at once. @default 10 */
  JOBS_CONCURRENCY: int(10, 1),
  /** Time zone of schedules created without one (IANA name). @default 'UTC' */
  JOBS_DEFAULT_TIMEZONE: z.string().refine((tz) => {
    try {
      new Intl.DateTimeFormat('en', { timeZone: tz });
      return true;
    } catch {
      return false;
    }
  }, 'must be an IANA time zone').default('UTC'),
  /**
   * `cleanup_expired_tokens` deletes API keys revoked (or of users deleted) longer ago than this.
   * Formerly `JOBS_REVOKED_KEY_RETENTION_DAYS`. @default 30
   */
  REVOKED_API_KEY_RETENTION_DAYS: int(30, 1),
  /**
   * Shortest gap between two fire times of a schedule created or changed by an actor without
   * system scope (a tenant administrator); system administrators are not limited. 0 = no floor. @default 60
   */
  JOBS_MIN_SCHEDULE_INTERVAL_SECONDS: int(60, 0),

  // --- payments ---
  /** Mounts the payments API (`/payments`, `/payouts`, `/ledger`) and GraphQL fields. The `payments` service (provider registry) exists either way. @default false */
  PAYMENTS_ENABLED: bool(false),
  /** Double-entry ledger: completions and refunds post balanced entries; `/ledger/*` is mounted. @default false */
  PAYMENTS_LEDGER_ENABLED: bool(false),
  /** Stripe secret API key; the `stripe` provider is registered only when this and `STRIPE_WEBHOOK_SECRET` are set. */
  STRIPE_SECRET_KEY: z.string().min(1).optional(),
  /** Stripe webhook signing secret (`whsec_...`), checked on `POST /webhooks/stripe`. */
  STRIPE_WEBHOOK_SECRET: z.string().min(1).optional(),
  /** Base URL of the Stripe API (default Stripe's own); tests point it at a local server. */
  STRIPE_API_URL: z.string().url().optional(),
  /** Fee withheld from each payout batch, in percent of its gross amount (decimal string). @default '0' */
  PAYOUT_FEE_PERCENT: z.string().regex(/^\d{1,3}(\.\d{1,4})?$/, 'must be a percentage such as 2.5').default('0'),
  /**
   * Settlement approves a batch whose net amount is below this (in the batch's currency, decimal
   * string) by itself; others need a system administrator other than the batch's creator. '0' = never. @default '0'
   */
  PAYOUT_AUTO_APPROVE_THRESHOLD: z.string().regex(/^\d+(\.\d+)?$/, 'must be a decimal such as 500.00').default('0'),
  /** Refunds still `reserved` after this many seconds are reconciled by `reconcile_payment_refunds`. @default 900 */
  PAYMENT_REFUND_RECONCILE_SECONDS: int(900, 1),

  // --- mail and invitations ---
  /**
   * The SMTP server e-mail goes out through (nodemailer), e.g. `smtp://user:pass@smtp.example.com:587`
   * or `smtps://…:465`. Without it, e-mails are written to the log outside production and refused
   * in production (503 `MAIL_UNAVAILABLE`). Never logged (it may hold a password).
   */
  SMTP_URL: z.string().url().refine((u) => /^smtps?:\/\//.test(u), 'must be an smtp:// or smtps:// URL').optional(),
  /** Sender of the server's e-mails. @default 'Plugin API Server <no-reply@localhost>' */
  MAIL_FROM: z.string().min(3).default('Plugin API Server <no-reply@localhost>'),
  /** How long an invitation's link can be accepted. @default 72 */
  INVITATION_TTL_HOURS: int(72, 1),
  /**
   * The page an invitation's link opens; the link is this URL plus `?token=<token>`, and the page
   * posts the token to `POST /invitations/accept`. @default 'http://localhost:3000/admin/#/invitation'
   */
  INVITATION_LINK_URL: z.string().url().default('http://localhost:3000/admin/#/invitation'),

  // --- webauthn (config/webauthn.ts) ---
  ...webauthnSettings,

  /** Serve the admin console (a single-page app on the GraphQL API) at `/admin`. @default true */
  ADMIN_CONSOLE_ENABLED: bool(true),

  // --- limits of the pipeline, idempotency, shutdown (config/limits.ts) ---
  ...limitSettings,

  // --- observability (config/observability.ts) ---
  ...observabilitySettings,

  // --- privacy ---
  /** Neutral value of required text fields and the user's name on erasure; replaces personal values in audit entries. @default 'deleted-user' */
  PRIVACY_PSEUDONYM: z.string().min(1).max(100).default('deleted-user'),
  /** Domain of the pseudonymous email an erased user keeps (`erased-<user id>@<domain>`; `.invalid` never resolves). @default 'deleted.invalid' */
  PRIVACY_ERASED_EMAIL_DOMAIN: z.string().regex(/^[a-z0-9.-]+\.[a-z]{2,}$/, 'must be a domain name').default('deleted.invalid'),
  /** A running erasure not renewed for this long is taken to have crashed; executing it again resumes it. @default 300 */
  PRIVACY_ERASURE_LEASE_SECONDS: int(300, 1),
  /** Allowed consent purposes, comma-separated; empty = any well-formed purpose. @default '' */
  PRIVACY_CONSENT_PURPOSES: csv,

  // --- files (config/files.ts) ---
  ...filesSettings,

  /** Extra plugin modules (paths or package names), comma-separated; each exports a plugin object. */
  PLUGINS: csv,
  /**
   * Names of built-in plugins to leave out, comma-separated. It wins over a plugin's own
   * `*_ENABLED` flag: a disabled plugin is not loaded at all.
   */
  DISABLED_PLUGINS: csv,
});

/**
 * Settings renamed to the `<THING>_RETENTION_DAYS` pattern, old name → new name. The old name is
 * still read when the new one is unset; either way start-up logs a warning naming both.
 */
export const DEPRECATED_SETTINGS = {
  JOBS_CLEANUP_DAYS: 'JOB_RUN_RETENTION_DAYS',
  JOBS_REVOKED_KEY_RETENTION_DAYS: 'REVOKED_API_KEY_RETENTION_DAYS',
} as const satisfies Record<string, keyof z.input<typeof configSchema>>;
type DeprecatedSetting = keyof typeof DEPRECATED_SETTINGS;

/** Something start-up should log at `warn` level: today only a deprecated variable name in use. */
export interface ConfigWarning {
  /** The variable the environment sets. */
  setting: DeprecatedSetting;
  /** The variable to set instead. */
  replacement: (typeof DEPRECATED_SETTINGS)[DeprecatedSetting];
  message: string;
}

type ParsedConfig = z.infer<typeof configSchema>;
/** A `WEBHOOK_PROVIDERS` entry with its secret resolved from `secret_env`. */
export type WebhookProviderSetting = Omit<z.infer<typeof webhookProviderSetting>, 'secret_env'> & { secret: string };
/** Settings as parsed from the environment: secrets may still be missing outside production. */
export type LoadedConfig = Omit<ParsedConfig, 'WEBHOOK_PROVIDERS'> & { WEBHOOK_PROVIDERS: WebhookProviderSetting[] };
/** Settings of a running app: every secret is set (`createApp` fills missing ones, see config/secrets.ts). */
export type Config = Omit<LoadedConfig, SecretSetting> & Record<SecretSetting, string>;
export type ConfigInput = Partial<Record<keyof Config, string | undefined>>;

/** Raised for a bad setting; its message names every offending variable. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/**
 * Parse settings from an environment-like object. Outside production `TOKEN_SECRET` and
 * `CURSOR_HMAC_SECRET` may be missing: `createApp` then generates and persists them.
 * @param env defaults to `process.env`; tests pass their own object.
 * @throws ConfigError naming each bad variable; a published placeholder secret in any mode; a
 *   missing or short (< 32 bytes) secret in production
 */
export function loadConfig(env: Record<string, string | undefined> = process.env): LoadedConfig {
  return readConfig(env).config;
}

/**
 * `loadConfig` plus the warnings start-up logs (server.ts): one per deprecated variable name the
 * environment sets. A deprecated name is read only when its replacement is unset.
 * @throws ConfigError as `loadConfig`; a bad value set under a deprecated name is reported under that name
 */
export function readConfig(env: Record<string, string | undefined> = process.env): { config: LoadedConfig; warnings: ConfigWarning[] } {
  const given = (key: string) => (env[key] === undefined || env[key] === '' ? undefined : env[key]);
  const picked: Record<string, string> = {};
  for (const key of Object.keys(configSchema.shape)) {
    const v = given(key);
    if (v !== undefined) picked[key] = v;
  }
  const warnings: ConfigWarning[] = [];
  const setAs = new Map<string, string>();
  for (const [setting, replacement] of Object.entries(DEPRECATED_SETTINGS) as [DeprecatedSetting, ConfigWarning['replacement']][]) {
    const v = given(setting);
    if (v === undefined) continue;
    const used = picked[replacement] === undefined;
    if (used) {
      picked[replacement] = v;
      setAs.set(replacement, setting);
    }
    warnings.push({
      setting,
      replacement,
      message: used
        ? `${setting} is deprecated: rename it to ${replacement} (its value is used for now)`
        : `${setting} is deprecated and ignored: ${replacement} is set too; remove ${setting}`,
    });
  }
  const res = configSchema.safeParse(picked);
  if (!res.success) {
    const lines = res.error.issues.map((i) => {
      const key = String(i.path[0] ?? '?');
      return `  ${setAs.get(key) ?? key}: ${i.message}`;
    });
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  const { WEBHOOK_PROVIDERS: providers, ...rest } = res.data;
  const problems: string[] = [];
  const cfg: LoadedConfig = {
    ...rest,
    WEBHOOK_PROVIDERS: providers.map(({ secret_env, ...p }) => {
      const secret = env[secret_env];
      if (!secret) problems.push(`  WEBHOOK_PROVIDERS: provider "${p.name}" names secret_env ${secret_env}, which is not set`);
      return { ...p, secret: secret ?? '' };
    }),
  };
  for (const name of SECRET_SETTINGS) {
    const value = cfg[name];
    if (value === PLACEHOLDERS[name]) problems.push(`  ${name}: is the placeholder published in the source; set a random value of at least ${MIN_SECRET_BYTES} bytes`);
    else if (cfg.NODE_ENV !== 'production') continue;
    else if (value === undefined) problems.push(`  ${name}: required in production; set a random value of at least ${MIN_SECRET_BYTES} bytes`);
    else if (Buffer.byteLength(value) < MIN_SECRET_BYTES) problems.push(`  ${name}: must be at least ${MIN_SECRET_BYTES} bytes in production`);
  }
  if (cfg.NODE_ENV === 'production' && cfg.METRICS_ENABLED && cfg.METRICS_PORT === undefined && !cfg.METRICS_TOKEN) {
    problems.push('  METRICS_ENABLED: in production /metrics must not be open on the API port: set METRICS_PORT (a port only Prometheus reaches) or METRICS_TOKEN (a bearer token Prometheus sends), or METRICS_ENABLED=false');
  }
  if (problems.length) throw new ConfigError(`Invalid configuration:\n${problems.join('\n')}`);
  return { config: cfg, warnings };
}

/** Tracing is on when an exporter is named or an OTLP endpoint is set (docs/observability.md). */
export const tracingRequested = (c: Pick<Config, 'OTEL_EXPORTER_OTLP_ENDPOINT' | 'OTEL_TRACES_EXPORTER'>): boolean =>
  c.OTEL_TRACES_EXPORTER ? c.OTEL_TRACES_EXPORTER !== 'none' : !!c.OTEL_EXPORTER_OTLP_ENDPOINT;
