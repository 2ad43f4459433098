import { dirname, isAbsolute, relative, resolve, sep } from 'node:path';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const ROOT = import.meta.dirname;

/**
 * Files of a plugin (or of a part of one, in a subfolder) allowed to import Koa, GraphQL or Pothos:
 * the wiring (index.ts), REST routes (routes.ts, rest.ts, http.ts), the GraphQL fragment and Yoga plugins (yoga.ts).
 */
const WIRING = ['index.ts', 'routes.ts', 'rest.ts', 'graphql.ts', 'http.ts', 'yoga.ts'];

const HTTP_AND_GRAPHQL = [
  { group: ['koa', 'koa-*', '@koa/*', 'graphql', 'graphql-*', '@graphql-*', '@pothos/*'], message: 'Service logic stays free of Koa and GraphQL: move this code to index.ts, routes.ts or graphql.ts (docs/plugins.md "Layout").' },
];

/**
 * The plugin an absolute path lies in (`plugins/<name>/<rest>`), or undefined. Every folder under
 * `plugins/` is a plugin: the fence follows the tree, so a new folder needs no list entry.
 */
function pluginOf(file) {
  const parts = relative(ROOT, file).split(sep);
  return parts[0] === 'plugins' && parts.length >= 3 ? { name: parts[1], rest: parts.slice(2).join('/') } : undefined;
}

/** A plugin's `public/` folder: the contracts it offers other plugins (values and types). */
const isPublic = (rest) => rest.startsWith('public/');

/**
 * `fence/plugin-boundary`: a file of one plugin imports nothing of another plugin except its
 * `public/` folder and `import type` from its `index.ts`; a file of a `public/` folder imports
 * nothing of its own plugin outside that folder (importing a contract never loads the plugin).
 * It resolves each relative (or absolute) specifier against the importing file and judges the
 * target path, so `../x/a.ts`, `../../plugins/x/a.ts` and any longer detour are the same import.
 */
const pluginBoundary = {
  meta: {
    type: 'problem',
    schema: [],
    messages: {
      internals: 'A plugin never imports another plugin\'s internals: use its service (services.get), its public/ contracts or the hook bus. ({{target}})',
      publicOnly: 'A public/ contract imports only core/, lib/, config/ and public/ folders, never its plugin\'s internals. ({{target}})',
      valueFromIndex: 'Only types may be imported from another plugin\'s index.ts; reach its code through services.get(...). ({{target}})',
    },
  },
  create(context) {
    const self = pluginOf(context.filename);
    if (!self) return {};
    const check = (node, source, typeOnly) => {
      const spec = source?.value;
      if (typeof spec !== 'string' || !(spec.startsWith('.') || isAbsolute(spec))) return;
      const target = pluginOf(resolve(dirname(context.filename), spec));
      if (!target) return;
      const data = { target: `plugins/${target.name}/${target.rest}` };
      if (isPublic(self.rest) && !isPublic(target.rest)) context.report({ node, messageId: 'publicOnly', data });
      else if (target.name === self.name || isPublic(target.rest)) return;
      else if (!/^index\.[cm]?[jt]s$/.test(target.rest)) context.report({ node, messageId: 'internals', data });
      else if (!typeOnly) context.report({ node, messageId: 'valueFromIndex', data });
    };
    /** `import type {…}`, or `import { type A, type B }` with every specifier a type. */
    const onlyTypes = (kind, specifiers, key) => kind === 'type' || (specifiers.length > 0 && specifiers.every((s) => s[key] === 'type'));
    return {
      ImportDeclaration: (node) => check(node, node.source, onlyTypes(node.importKind, node.specifiers, 'importKind')),
      ExportNamedDeclaration: (node) => node.source && check(node, node.source, onlyTypes(node.exportKind, node.specifiers, 'exportKind')),
      ExportAllDeclaration: (node) => check(node, node.source, node.exportKind === 'type'),
      ImportExpression: (node) => node.source.type === 'Literal' && check(node, node.source, false),
      TSImportType: (node) => check(node, node.argument?.literal ?? node.argument, true),
      TSExternalModuleReference: (node) => check(node, node.expression, node.parent?.importKind === 'type'),
    };
  },
};

export default tseslint.config(
  { ignores: ['node_modules/**', '.cache/**', '.data/**', 'coverage/**', 'dist/**', 'test-results/**', 'admin-console/dist/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'error',
    },
  },
  {
    // Every folder under plugins/ is a plugin: matched by glob, so a new folder is fenced as it appears.
    files: ['plugins/*/**/*.ts'],
    plugins: { fence: { rules: { 'plugin-boundary': pluginBoundary } } },
    rules: { 'fence/plugin-boundary': 'error' },
  },
  {
    files: ['plugins/*/**/*.ts'],
    ignores: WIRING.map((f) => `plugins/**/${f}`),
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: HTTP_AND_GRAPHQL }] },
  },
  {
    // The template (docs/examples/notes) follows the layout it teaches; of the plugins it imports only public/ contracts.
    files: ['docs/examples/notes/**/*.ts'],
    ignores: WIRING.map((f) => `docs/examples/notes/${f}`),
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: [{ regex: '(^|/)plugins/(?![^/]+/public/)', message: 'The template imports no plugin but its public/ contracts.' }, ...HTTP_AND_GRAPHQL] }] },
  },
  {
    // Settings are the bottom layer: config/ reads the environment and imports neither the kernel nor a plugin.
    files: ['config/**/*.ts'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: [{ group: ['**/core/**', '**/plugins/**', '**/builtin-plugins.ts'], message: 'config/ is the bottom layer: it imports no kernel or plugin code (the plugin list is builtin-plugins.ts, beside server.ts).' }] }] },
  },
  {
    // The kernel knows no plugin: plugins are listed in builtin-plugins.ts (beside server.ts) and reached through services.
    files: ['core/**/*.ts'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: [{ group: ['**/plugins/**'], message: 'core/ never imports a plugin.' }] }] },
  },
  {
    // lib/ holds helpers plugins share (cursors, pages, ETags): they keep no state, know no plugin and of the kernel only its error family.
    files: ['lib/**/*.ts'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: [{ group: ['**/plugins/**', '**/builtin-plugins.ts', '**/core/**', '!**/core/errors.ts'], message: 'lib/ imports no plugin, and of core/ only errors.ts: it is what plugins share below the kernel.' }] }] },
  },
  {
    // The admin console is a browser app on the public GraphQL API: it imports no server code and no Node module.
    files: ['admin-console/src/**/*.{ts,tsx}'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: [
      { group: ['**/core/**', '**/plugins/**', '**/config/**', 'node:*', 'plugin-api-server', 'plugin-api-server/*'], message: 'The console talks to /graphql only: no server code in the browser bundle (docs/console.md).' },
    ] }] },
  },
  {
    // Response bodies in tests are asserted field by field; typing each one adds nothing.
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
