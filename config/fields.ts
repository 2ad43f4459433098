import { z } from 'zod';

/** The shapes of settings, shared by every settings file under config/. */

/** A boolean setting: `true`, `false`, `yes`, `no`, `1` or `0`. */
export const bool = (def: boolean) =>
  z
    .enum(['true', 'false', '1', '0', 'yes', 'no'], { message: 'must be one of true, false, yes, no, 1, 0' })
    .default(def ? 'true' : 'false')
    .transform((v) => v === 'true' || v === '1' || v === 'yes');

/** A whole number, at least `min`. */
export const int = (def: number, min = 0) => z.coerce.number().int().min(min).default(def);

/** A comma-separated list, entries trimmed, empty entries dropped. */
export const csv = z
  .string()
  .default('')
  .transform((s) =>
    s
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean),
  );
