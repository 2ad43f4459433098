import { z } from 'zod';

export const livenessResponse = z.object({ status: z.literal('ok') });
export const readinessResponse = z.object({ status: z.literal('ready'), checks: z.record(z.string(), z.string()) });
export const detailedResponse = z.object({
  status: z.enum(['ok', 'degraded']),
  checks: z.record(z.string(), z.object({ status: z.enum(['ok', 'failed', 'timeout', 'error']), duration_ms: z.number().int() })),
});
