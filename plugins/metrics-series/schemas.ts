import { z } from 'zod';

/** GraphQL `metricsOverview` arguments: the last hour (1-minute steps) or day (5-minute steps). */
export const overviewArgs = z.object({ range: z.enum(['hour', 'day']) }).strict();
export type Range = z.output<typeof overviewArgs>['range'];
