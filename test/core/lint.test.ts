import { randomBytes } from 'node:crypto';
import { rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { ESLint } from 'eslint';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * `npm run lint` (eslint.config.js) enforces the plugin layout of docs/plugins.md "Layout". These
 * tests write deliberate violations into real plugin folders and lint them with the project's own
 * configuration, as `npm run lint` does, so a weakened rule fails here.
 */
const ROOT = resolve(import.meta.dirname, '../..');
const eslint = new ESLint({ cwd: ROOT });
const RULE = '@typescript-eslint/no-restricted-imports';
const written: string[] = [];

/** Writes `source` to `<dir>/__lint_probe_<random>.ts` and returns the lint messages of that file. */
async function lintProbe(dir: string, source: string): Promise<{ ruleId: string | null; message: string }[]> {
  const file = join(ROOT, dir, `__lint_probe_${randomBytes(4).toString('hex')}.ts`);
  written.push(file);
  try {
    await writeFile(file, source);
    const [result] = await eslint.lintFiles([file]);
    return result!.messages.map(({ ruleId, message }) => ({ ruleId, message }));
  } finally {
    await rm(file, { force: true });
  }
}

afterAll(async () => {
  // A crash between write and rm must not leave a probe behind for the real `npm run lint`.
  await Promise.all(written.map((f) => rm(f, { force: true })));
});

describe('npm run lint enforces the plugin layout', () => {
  it('fails on an import of another plugin\'s internals', async () => {
    const messages = await lintProbe('plugins/audit', "import { JobsService } from '../jobs/service.ts';\nexport const probe = JobsService;\n");
    expect(messages).toEqual([
      { ruleId: RULE, message: expect.stringContaining('A plugin never imports another plugin\'s internals: use its service (services.get) or the hook bus') },
    ]);
  });

  it('fails on a value import from another plugin\'s index.ts; a type import of it passes', async () => {
    const value = await lintProbe('plugins/audit', "import { jobsPlugin } from '../jobs/index.ts';\nexport const probe = jobsPlugin;\n");
    expect(value).toEqual([{ ruleId: RULE, message: expect.stringContaining('Only types may be imported from another plugin\'s index.ts') }]);
    const typeOnly = await lintProbe('plugins/audit', "import type { JobsService } from '../jobs/index.ts';\nexport type Probe = JobsService;\n");
    expect(typeOnly).toEqual([]);
  });

  it('fails on a Koa, GraphQL or Pothos import outside the wiring files', async () => {
    for (const mod of ['koa', '@koa/router', 'graphql', '@pothos/core']) {
      const messages = await lintProbe('plugins/audit', `import type * as M from '${mod}';\nexport type Probe = typeof M;\n`);
      expect(messages, mod).toEqual([{ ruleId: RULE, message: expect.stringContaining('Service logic stays free of Koa and GraphQL') }]);
    }
  });

  it('allows Koa and GraphQL in a wiring file (graphql.ts, routes.ts, ...)', async () => {
    for (const wiring of ['graphql.ts', 'routes.ts', 'index.ts']) {
      const [result] = await eslint.lintText("import type { Context } from 'koa';\nexport type Probe = Context;\n", { filePath: join(ROOT, 'plugins/audit', wiring) });
      expect(result!.messages, wiring).toEqual([]);
    }
  });

  it('fails on core importing a plugin', async () => {
    const messages = await lintProbe('core', "import type { AuditLogger } from '../plugins/audit/index.ts';\nexport type Probe = AuditLogger;\n");
    expect(messages).toEqual([{ ruleId: RULE, message: expect.stringContaining('core/ never imports a plugin') }]);
  });

  it('passes a clean service file', async () => {
    const messages = await lintProbe(
      'plugins/audit',
      "import { z } from 'zod';\nimport type { Actor } from '../../core/context.ts';\nimport { requireRole } from '../../core/identity/guards.ts';\n\n" +
        "export const probeInput = z.object({ days: z.number().int().min(1) });\n" +
        "export function probe(actor: Actor, input: unknown): number {\n  requireRole(actor, 'admin');\n  return probeInput.parse(input).days;\n}\n",
    );
    expect(messages).toEqual([]);
  });
});
