import { describe, expect, it } from 'vitest';
import { uniqueDbUri } from '../helpers/app.ts';
import { runServerToExit } from './helpers.ts';

const cases: { fixture: string; env?: Record<string, string>; cause: RegExp }[] = [
  { fixture: 'bad-webhook-secret', env: { WEBHOOKS_ENABLED: 'true' }, cause: /secret/ },
  { fixture: 'duplicate-resource', cause: /"projects" is registered twice/ },
  { fixture: 'bad-status-map', env: { PAYMENTS_ENABLED: 'true' }, cause: /status_map\.PAID = "settled" is not a Payment status/ },
  { fixture: 'missing-dependency', cause: /depends on "no-such-plugin", which is not enabled/ },
  { fixture: 'bad-option', cause: /per_page: .*100/ },
  { fixture: 'duplicate-route', cause: /GET \/projects.*"resources"/ },
];

describe('a plugin mistake stops start-up with one line naming the plugin and the cause', () => {
  it.each(cases)('$fixture', async ({ fixture, env, cause }) => {
    const { code, stdout, stderr } = await runServerToExit({ MONGODB_URI: uniqueDbUri(), PLUGINS: `./test/fixtures/dx/${fixture}.ts`, ...env });
    expect(code).toBe(1);
    const lines = stderr.trim().split('\n');
    expect(lines, stderr).toHaveLength(1);
    expect(lines[0]).toContain(`"${fixture}"`);
    expect(lines[0]).toMatch(cause);
    expect(stdout + stderr).not.toMatch(/Mongo\w*Error|client was closed|expired session/i);
  });
});
