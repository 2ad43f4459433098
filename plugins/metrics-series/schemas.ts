import { z } from 'zod';
import { objectId } from '../../core/http/schemas.ts';

/** GraphQL `metricsOverview` arguments: the last hour (1-minute steps) or day (5-minute steps). */
export const overviewArgs = z.object({ range: z.enum(['hour', 'day']) }).strict();
export type Range = z.output<typeof overviewArgs>['range'];

const range = z.enum(['hour', 'day']);
/** GraphQL `jobSeries` arguments: a job by name, the last hour or day. */
export const jobSeriesArgs = z.object({ job: z.string().min(1).max(200), range }).strict();
/** GraphQL `webhookEndpointSeries` arguments: an outbound endpoint's id, the last hour or day. */
export const endpointSeriesArgs = z.object({ endpoint_id: objectId, range }).strict();
/** GraphQL `paymentSeries` arguments: the last `days` UTC days, today included. */
export const paymentSeriesArgs = z.object({ days: z.number().int().min(1).max(90).default(7) }).strict();
