import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** The plugin folders: each may reach another only through `import type` of its `index.ts`. */
const PLUGINS = ['access', 'audit', 'jobs', 'openapi', 'payments', 'privacy', 'resources', 'webauthn', 'webhooks', 'admin-console'];

/** Files of a plugin allowed to import Koa, GraphQL or Pothos: the wiring (index.ts), REST routes (routes.ts, rest.ts, http.ts) and the GraphQL fragment. */
const WIRING = ['index.ts', 'routes.ts', 'rest.ts', 'graphql.ts', 'http.ts'];

const HTTP_AND_GRAPHQL = [
  { group: ['koa', 'koa-*', '@koa/*', 'graphql', 'graphql-*', '@graphql-*', '@pothos/*'], message: 'Service logic stays free of Koa and GraphQL: move this code to index.ts, routes.ts or graphql.ts (docs/plugins.md "Layout").' },
];

/** Other plugins' files are off limits; their index.ts is allowed for types only. */
const crossPlugin = (self) => {
  const others = PLUGINS.filter((p) => p !== self).join('|');
  return [
    { regex: `^\\.\\./(${others})/(?!index\\.ts$)`, message: 'A plugin never imports another plugin\'s internals: use its service (services.get) or the hook bus, or put the shared piece in core/.' },
    { regex: `^\\.\\./(${others})/index\\.ts$`, allowTypeImports: true, message: 'Only types may be imported from another plugin\'s index.ts; reach its code through services.get(...).' },
  ];
};

export default tseslint.config(
  { ignores: ['node_modules/**', '.data/**', 'coverage/**', 'dist/**', 'test-results/**', 'admin-console/dist/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'error',
    },
  },
  ...PLUGINS.map((p) => ({
    files: [`plugins/${p}/**/*.ts`],
    ignores: WIRING.map((f) => `plugins/${p}/${f}`),
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: [...crossPlugin(p), ...HTTP_AND_GRAPHQL] }] },
  })),
  ...PLUGINS.map((p) => ({
    files: WIRING.map((f) => `plugins/${p}/${f}`),
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: crossPlugin(p) }] },
  })),
  {
    // The template (docs/examples/notes) follows the layout it teaches; it imports no plugin at all.
    files: ['docs/examples/notes/**/*.ts'],
    ignores: WIRING.map((f) => `docs/examples/notes/${f}`),
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: [{ group: ['**/plugins/**'], message: 'The template imports no plugin.' }, ...HTTP_AND_GRAPHQL] }] },
  },
  {
    // The kernel knows no plugin: plugins are listed in config/plugins.ts and reached through services.
    files: ['core/**/*.ts'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: [{ group: ['**/plugins/**'], message: 'core/ never imports a plugin.' }] }] },
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
