import { z } from 'zod';

/**
 * Settings of passkeys (the webauthn plugin, docs/webauthn.md), spread into the config schema of `config/index.ts`.
 * Names are the environment variable names.
 */
export const webauthnSettings = {
  /** Relying-party id: the frontend's host or a registrable suffix of it (no scheme, no port). @default 'localhost' */
  WEBAUTHN_RP_ID: z
    .string()
    .regex(/^[a-z0-9.-]+$/i, 'must be a host name (no scheme, no port)')
    .default('localhost'),
  /** Name the browser shows in its passkey prompt. @default 'Plugin API Server' */
  WEBAUTHN_RP_NAME: z.string().min(1).default('Plugin API Server'),
  /**
   * Origins accepted in client data, comma-separated (web plus a second frontend), each exactly as
   * the browser sends it: scheme, host, port, no path. @default 'http://localhost:3000'
   * @example https://app.example.com,https://admin.example.com
   */
  WEBAUTHN_ORIGIN: z
    .string()
    .default('http://localhost:3000')
    .transform((s, ctx) => {
      const list = s.split(',').map((x) => x.trim()).filter(Boolean);
      for (const o of list) {
        let origin: string | null = null;
        try {
          origin = new URL(o).origin;
        } catch {
          /* reported below */
        }
        if (origin !== o) ctx.addIssue({ code: 'custom', message: `"${o}" is not an origin (scheme://host[:port], no path or trailing slash)` });
      }
      if (!list.length) ctx.addIssue({ code: 'custom', message: 'must name at least one origin' });
      return list;
    }),
  /** Serve the passkey demo page `GET /auth/webauthn/demo`. @default true in development, else false */
  WEBAUTHN_DEMO_ENABLED: z.enum(['true', 'false', '1', '0', 'yes', 'no']).optional().transform((v) => (v === undefined ? undefined : v === 'true' || v === '1' || v === 'yes')),
};
