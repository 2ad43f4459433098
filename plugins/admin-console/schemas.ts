import { z } from 'zod';

/** Plugin options (set in code; the on/off switch is the `ADMIN_CONSOLE_ENABLED` setting). */
export const adminConsoleOptions = z.object({
  /**
   * Folder of the built console (`vite build` output, holding `index.html` and `assets/`).
   * @default the repository's `admin-console/dist`
   */
  dist_dir: z.string().min(1).optional(),
});
export type AdminConsoleOptions = z.output<typeof adminConsoleOptions>;

/** `GET /admin-console/assets/:file`: a file name of the build (no path). */
export const assetParams = z.object({
  file: z.string().regex(/^[\w.-]+$/, 'a file name of the console build').describe('A file of the build, e.g. `index-3f2a1c.js`'),
});
