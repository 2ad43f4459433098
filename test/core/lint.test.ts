import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

/**
 * `npm run lint` (eslint.config.js) enforces the plugin layout of docs/plugins.md "Layout". These
 * tests lint deliberate violations with the project's own configuration, as `npm run lint` does,
 * through `lintText` with a path inside the tree: the config and rules that apply are the ones
 * that path gets, and nothing is written to disk, so a weakened rule fails here.
 */
const ROOT = resolve(import.meta.dirname, '../..');
const eslint = new ESLint({ cwd: ROOT });
const RESTRICTED = '@typescript-eslint/no-restricted-imports';
const FENCE = 'fence/plugin-boundary';
const INTERNALS = 'A plugin never imports another plugin\'s internals: use its service (services.get), its public/ contracts';
const PUBLIC_ONLY = 'A public/ contract imports only core/, lib/, config/ and public/ folders';
const TYPES_ONLY = 'Only types may be imported from another plugin\'s index.ts';

/** The lint messages of `source` as if it were the file `path` (relative to the root). */
async function lintAs(path: string, source: string): Promise<{ ruleId: string | null; message: string }[]> {
  const [result] = await eslint.lintText(source, { filePath: join(ROOT, path) });
  return result!.messages.map(({ ruleId, message }) => ({ ruleId, message }));
}

const refused = (text: string) => [{ ruleId: FENCE, message: expect.stringContaining(text) }];

describe('npm run lint fences each plugin off from the others', () => {
  it.each([
    ['plugins/payments/probe.ts', '../resources/service.ts'],
    ['plugins/payments/probe.ts', '../../plugins/resources/service.ts'],
    ['plugins/payments/ledger/probe.ts', '../../../plugins/resources/service.ts'],
    ['plugins/payments/probe.ts', '../payments/../resources/service.ts'],
    ['plugins/payments/probe.ts', `${ROOT}/plugins/resources/service.ts`],
  ])('%s: an import of %s (another plugin\'s internals) is refused', async (file, spec) => {
    expect(await lintAs(file, `import { probe } from '${spec}';\nexport const p = probe;\n`)).toEqual(refused(INTERNALS));
  });

  it('refuses a type-only import of internals, a re-export and a dynamic import too', async () => {
    expect(await lintAs('plugins/payments/probe.ts', "import type { Probe } from '../../plugins/resources/service.ts';\nexport type P = Probe;\n"))
      .toEqual(refused(INTERNALS));
    expect(await lintAs('plugins/payments/probe.ts', "export { probe } from '../resources/service.ts';\n")).toEqual(refused(INTERNALS));
    expect(await lintAs('plugins/payments/probe.ts', "export const p = () => import('../../plugins/resources/index.ts');\n")).toEqual(refused(TYPES_ONLY));
  });

  it('allows `import type` from another plugin\'s index.ts, by any path; a value import from it is refused', async () => {
    for (const spec of ['../resources/index.ts', '../../plugins/resources/index.ts']) {
      expect(await lintAs('plugins/payments/probe.ts', `import type { Probe } from '${spec}';\nexport type P = Probe;\n`), spec).toEqual([]);
      expect(await lintAs('plugins/payments/probe.ts', `import { type Probe } from '${spec}';\nexport type P = Probe;\n`), spec).toEqual([]);
      expect(await lintAs('plugins/payments/probe.ts', `import { probe } from '${spec}';\nexport const p = probe;\n`), spec).toEqual(refused(TYPES_ONLY));
    }
    expect(await lintAs('plugins/payments/probe.ts', "import '../resources/index.ts';\n")).toEqual(refused(TYPES_ONLY));
  });

  it('allows values and types from another plugin\'s public/ folder, by any path', async () => {
    for (const spec of ['../events/public/outbox.ts', '../../plugins/events/public/outbox.ts', `${ROOT}/plugins/events/public/outbox.ts`]) {
      expect(await lintAs('plugins/payments/probe.ts', `import { OUTBOX_FIELD } from '${spec}';\nexport const p = OUTBOX_FIELD;\n`), spec).toEqual([]);
    }
    expect(await lintAs('plugins/payments/probe.ts', "import { probe } from '../events/publicity.ts';\nexport const p = probe;\n")).toEqual(refused(INTERNALS));
  });

  it('keeps a public/ contract apart from its plugin: it imports no internals, of its own plugin or another', async () => {
    for (const spec of ['../service.ts', '../index.ts', '../../resources/service.ts', '../../resources/index.ts']) {
      expect(await lintAs('plugins/events/public/probe.ts', `import type { Probe } from '${spec}';\nexport type P = Probe;\n`), spec).toEqual(refused(PUBLIC_ONLY));
    }
    for (const spec of ['./outbox.ts', '../../jobs/public/runner.ts', '../../../core/hooks.ts']) {
      expect(await lintAs('plugins/events/public/probe.ts', `import type { Probe } from '${spec}';\nexport type P = Probe;\n`), spec).toEqual([]);
    }
  });

  it('lets the template (docs/examples/notes) import public/ contracts and nothing else of a plugin', async () => {
    expect(await lintAs('docs/examples/notes/probe.ts', "import { OUTBOX_FIELD } from '../../../plugins/events/public/outbox.ts';\nexport const p = OUTBOX_FIELD;\n")).toEqual([]);
    for (const spec of ['../../../plugins/events/service.ts', '../../../plugins/events/index.ts']) {
      expect(await lintAs('docs/examples/notes/probe.ts', `import type { Probe } from '${spec}';\nexport type P = Probe;\n`), spec)
        .toEqual([{ ruleId: RESTRICTED, message: expect.stringContaining('The template imports no plugin but its public/ contracts') }]);
    }
  });

  it('allows a plugin its own files, by any path', async () => {
    for (const spec of ['./service.ts', '../payments/service.ts', '../../plugins/payments/service.ts']) {
      expect(await lintAs('plugins/payments/probe.ts', `import { probe } from '${spec}';\nexport const p = probe;\n`), spec).toEqual([]);
    }
  });

  it('fences a plugin folder that is on no list: a new folder is under the rule as it appears', async () => {
    const fresh = 'plugins/zz-fresh-plugin';
    expect(existsSync(join(ROOT, fresh))).toBe(false);
    expect(await lintAs(`${fresh}/service.ts`, "import { probe } from '../resources/service.ts';\nexport const p = probe;\n")).toEqual(refused(INTERNALS));
    expect(await lintAs('plugins/payments/probe.ts', `import { probe } from '../zz-fresh-plugin/service.ts';\nexport const p = probe;\n`)).toEqual(refused(INTERNALS));
    expect(await lintAs(`${fresh}/service.ts`, "import type * as M from 'koa';\nexport type P = typeof M;\n"))
      .toEqual([{ ruleId: RESTRICTED, message: expect.stringContaining('Service logic stays free of Koa and GraphQL') }]);
    expect(await lintAs(`${fresh}/index.ts`, "import type { Context } from 'koa';\nexport type P = Context;\n")).toEqual([]);
  });

  it('eslint.config.js names no plugin: nothing to edit when one is added', () => {
    const config = readFileSync(join(ROOT, 'eslint.config.js'), 'utf8');
    for (const name of ['audit', 'jobs', 'payments', 'resources', 'webhooks']) expect(config).not.toMatch(new RegExp(`['"\`]${name}['"\`]`));
  });
});

describe('npm run lint enforces the plugin layout', () => {
  it('fails on a Koa, GraphQL or Pothos import outside the wiring files', async () => {
    for (const mod of ['koa', '@koa/router', 'graphql', '@pothos/core']) {
      const messages = await lintAs('plugins/audit/probe.ts', `import type * as M from '${mod}';\nexport type Probe = typeof M;\n`);
      expect(messages, mod).toEqual([{ ruleId: RESTRICTED, message: expect.stringContaining('Service logic stays free of Koa and GraphQL') }]);
    }
  });

  it('allows Koa and GraphQL in a wiring file (graphql.ts, routes.ts, ...)', async () => {
    for (const wiring of ['graphql.ts', 'routes.ts', 'index.ts']) {
      expect(await lintAs(`plugins/audit/${wiring}`, "import type { Context } from 'koa';\nexport type Probe = Context;\n"), wiring).toEqual([]);
    }
  });

  it('fails on core importing a plugin', async () => {
    const messages = await lintAs('core/probe.ts', "import type { AuditLogger } from '../plugins/audit/index.ts';\nexport type Probe = AuditLogger;\n");
    expect(messages).toEqual([{ ruleId: RESTRICTED, message: expect.stringContaining('core/ never imports a plugin') }]);
  });

  it('fails on lib/ importing a plugin or the kernel beyond its error family', async () => {
    for (const spec of ['../core/plugin.ts', '../plugins/audit/index.ts', '../builtin-plugins.ts']) {
      const messages = await lintAs('lib/probe.ts', `import type * as M from '${spec}';\nexport type Probe = typeof M;\n`);
      expect(messages, spec).toEqual([{ ruleId: RESTRICTED, message: expect.stringContaining('lib/ imports no plugin') }]);
    }
    expect(await lintAs('lib/probe.ts', "import { BadRequestError } from '../core/errors.ts';\nexport const probe = new BadRequestError('x');\n")).toEqual([]);
  });

  it('fails on config/ importing the kernel, a plugin or the plugin list (settings are the bottom layer)', async () => {
    for (const spec of ['../core/plugin.ts', '../plugins/audit/index.ts', '../builtin-plugins.ts']) {
      const messages = await lintAs('config/probe.ts', `import type * as M from '${spec}';\nexport type Probe = typeof M;\n`);
      expect(messages, spec).toEqual([{ ruleId: RESTRICTED, message: expect.stringContaining('config/ is the bottom layer') }]);
    }
  });

  it('passes a clean service file', async () => {
    const messages = await lintAs(
      'plugins/audit/probe.ts',
      "import { z } from 'zod';\nimport type { Actor } from '../../core/context.ts';\nimport { requireRole } from '../../core/access.ts';\n\n" +
        "export const probeInput = z.object({ days: z.number().int().min(1) });\n" +
        "export function probe(actor: Actor, input: unknown): number {\n  requireRole(actor, 'admin');\n  return probeInput.parse(input).days;\n}\n",
    );
    expect(messages).toEqual([]);
  });
});
