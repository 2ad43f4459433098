/**
 * Build of the admin console: `npm run build:console` (or `npm start`) writes `dist/`, served by
 * the `admin-console` plugin at /admin with its files under /admin-console/assets/.
 * Development: `npm run console:dev` serves the sources with hot reload and forwards /graphql to
 * the API server (CONSOLE_API, default http://localhost:3000); see docs/console.md.
 */
import { defineConfig } from 'vite';

const api = process.env.CONSOLE_API ?? 'http://localhost:3000';

export default defineConfig({
  root: import.meta.dirname,
  base: '/admin-console/',
  publicDir: false,
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    assetsDir: 'assets',
    target: 'es2022',
    // No inline code anywhere: the page runs under script-src 'self' / style-src 'self'.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    reportCompressedSize: false,
  },
  server: {
    port: 5173,
    proxy: { '/graphql': { target: api, changeOrigin: false } },
  },
});
