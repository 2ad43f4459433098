/**
 * Builds the admin console (`admin-console/` → `admin-console/dist/`) with Vite, unless the build
 * on disk was made from the same sources (a hash of `admin-console/` less `dist`, plus the
 * lockfile, kept in `dist/.source-hash`). `npm start` (prestart) and the test set-up run it, so a
 * fresh clone serves and tests the console with no build output committed. `--force` always builds.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const ROOT = resolve(import.meta.dirname, '..');
export const CONSOLE_DIR = join(ROOT, 'admin-console');
export const DIST_DIR = join(CONSOLE_DIR, 'dist');
const HASH_FILE = join(DIST_DIR, '.source-hash');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return e.name === 'dist' || e.name === 'node_modules' ? [] : sources(p);
    return [p];
  });
}

/** Hash of everything the build reads. */
export function sourceHash(): string {
  const h = createHash('sha256');
  for (const f of [...sources(CONSOLE_DIR).sort(), join(ROOT, 'package-lock.json')]) {
    h.update(relative(ROOT, f)).update('\0').update(statSync(f).isFile() ? readFileSync(f) : '').update('\0');
  }
  return h.digest('hex');
}

/** Builds when stale (or always with `force`); resolves to whether it built. */
export async function buildConsole({ force = false, quiet = false } = {}): Promise<boolean> {
  const hash = sourceHash();
  if (!force && existsSync(HASH_FILE) && readFileSync(HASH_FILE, 'utf8') === hash && existsSync(join(DIST_DIR, 'index.html'))) return false;
  const { build } = await import('vite');
  await build({ configFile: join(CONSOLE_DIR, 'vite.config.ts'), logLevel: quiet ? 'warn' : 'info' });
  writeFileSync(HASH_FILE, hash);
  return true;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const built = await buildConsole({ force: process.argv.includes('--force') });
  if (!built) process.stdout.write('admin console: build is up to date (admin-console/dist)\n');
}
