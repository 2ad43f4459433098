import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../config/index.ts';
import { builtinPlugins, corePlugins } from '../../builtin-plugins.ts';
import { createApp, PluginError } from '../../core/kernel.ts';
import { AppError, ERROR_CATALOGUE, ErrorCode } from '../../core/errors.ts';
import { definePlugin } from '../../core/plugin.ts';
import { defineRoute } from '../../core/http/route.ts';
import { buildTestApp, TEST_SECRETS, uniqueDbUri, type TestApp } from '../helpers/app.ts';

/** `| 404 | NOT_FOUND | ... |` rows of the table in docs/errors.md: code → status. */
const documented = (): Map<string, number> => {
  const text = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
  const rows = [...text.matchAll(/^\| (\d{3}) \| ([A-Z_]+) \|/gm)];
  return new Map(rows.map((m) => [m[2]!, Number(m[1])]));
};

/** A plugin of a team's own, declaring one code of its errors and a route that answers it. */
const teamPlugin = (codes: Record<string, { example: AppError; description: string }>, name = 'quota') =>
  definePlugin({
    name,
    setup: () => ({
      errorCodes: codes,
      routes: [defineRoute({ method: 'GET', path: `/${name}/check`, auth: 'public', summary: 'Always over quota', docs: { errors: [402] }, handler: () => { throw new AppError(402, 'QUOTA_EXCEEDED', 'Over quota'); } })],
    }),
  });
const QUOTA = { QUOTA_EXCEEDED: { example: new AppError(402, 'QUOTA_EXCEEDED', 'Over quota', { limit: 10 }), description: 'The tenant used up its plan.' } };

const startWith = (plugin: ReturnType<typeof teamPlugin>) =>
  createApp({ corePlugins: corePlugins(), plugins: [plugin], config: loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent', MONGODB_URI: uniqueDbUri(), ...TEST_SECRETS }) });

describe('the error catalogue', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await buildTestApp({
      plugins: [...builtinPlugins(), teamPlugin(QUOTA)],
      config: { WEBHOOKS_ENABLED: 'true', JOBS_ENABLED: 'true', PAYMENTS_ENABLED: 'true', FILES_ENABLED: 'true' },
    });
  });
  afterAll(() => app?.close());

  it('holds every kernel code, each example carrying its own code', () => {
    for (const code of Object.values(ErrorCode)) expect(ERROR_CATALOGUE, code).toHaveProperty(code);
    for (const [code, doc] of Object.entries(ERROR_CATALOGUE)) {
      expect(doc.example.code).toBe(code);
      expect(doc.description.length).toBeGreaterThan(10);
    }
  });

  it('docs/errors.md lists every code of the kernel and the built-in plugins, with the same status, and no other', () => {
    const catalogue = new Map(app.app.kernel.errorCodes().filter((c) => c.plugin !== 'quota').map((c) => [c.code, c.example.status]));
    // The built-in plugins add their own: payments, passkeys, files, invitations, the mailer.
    for (const code of ['REFUND_EXCEEDS_CAPTURED', 'PROVIDER_ERROR', 'PASSKEY_CLONE_DETECTED', 'RANGE_NOT_SATISFIABLE', 'INVITATION_EXPIRED', 'MAIL_UNAVAILABLE']) {
      expect(catalogue.has(code), code).toBe(true);
    }
    expect(Object.fromEntries(documented())).toEqual(Object.fromEntries(catalogue));
  });

  it("a plugin's own code is listed by status with its plugin, and /openapi.json documents it on that status's response", async () => {
    const entries = app.app.kernel.errorCodes();
    expect(entries.find((c) => c.code === 'QUOTA_EXCEEDED')).toMatchObject({ plugin: 'quota', description: 'The tenant used up its plan.' });
    const statuses = entries.map((c) => c.example.status);
    expect(statuses).toEqual([...statuses].sort((a, b) => a - b));

    const res = await app.http('GET', '/openapi.json');
    expect(res.status).toBe(200);
    const response = res.body.components.responses.Error402;
    expect(response.description).toContain('`QUOTA_EXCEEDED`');
    expect(response.content['application/json'].examples.QUOTA_EXCEEDED.value.error).toEqual({ code: 'QUOTA_EXCEEDED', message: 'Over quota', details: { limit: 10 } });
    // The kernel's codes keep their place beside it.
    expect(res.body.components.responses.NotFound.description).toContain('`NOT_FOUND`');
  });

  it('refuses at start-up a code the kernel or another plugin declares, a malformed code, or an example of another code', async () => {
    const notFound = { NOT_FOUND: { example: new AppError(404, 'NOT_FOUND', 'x'), description: 'Mine too.' } };
    await expect(startWith(teamPlugin(notFound))).rejects.toThrow(new PluginError('Error code "NOT_FOUND" of plugin "quota" is already declared by the kernel'));
    const twice = definePlugin({ name: 'twice', dependsOn: ['quota'], setup: () => ({ errorCodes: QUOTA }) });
    await expect(createApp({
      corePlugins: corePlugins(), plugins: [teamPlugin(QUOTA), twice],
      config: loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent', MONGODB_URI: uniqueDbUri(), ...TEST_SECRETS }),
    })).rejects.toThrow('Error code "QUOTA_EXCEEDED" of plugin "twice" is already declared by plugin "quota"');
    await expect(startWith(teamPlugin({ 'quota-exceeded': QUOTA.QUOTA_EXCEEDED }))).rejects.toThrow('is not SCREAMING_SNAKE_CASE');
    await expect(startWith(teamPlugin({ OVER_QUOTA: QUOTA.QUOTA_EXCEEDED }))).rejects.toThrow('needs an AppError example carrying that code');
  });
});
