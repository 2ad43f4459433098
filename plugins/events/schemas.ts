import { z } from 'zod';

/** `GET /events` query: a type filter and cursor paging, as a resource list in cursor mode. */
export const eventListQuery = z.object({
  type: z.string().min(1).max(200).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(25),
  cursor: z.string().min(1).max(8192).optional(),
  direction: z.enum(['next', 'prev']).default('next'),
});
export type EventListQuery = z.output<typeof eventListQuery>;

export const eventIdParams = z.object({ id: z.string().regex(/^evt_[0-9a-f]{24}$/, 'must be an event id (evt_ and 24 hexadecimal digits)') });

/** An event as `GET /events` and `GET /events/{id}` show it. */
export const eventView = z.object({
  id: z.string(),
  type: z.string(),
  tenant_id: z.string().nullable(),
  created_at: z.date(),
  data: z.record(z.string(), z.unknown()),
  actor: z.string().nullable().describe('User id of the actor; null for the system'),
  request_id: z.string().nullable(),
});

/** `ping`: sent by `POST /webhook-endpoints/{id}/test` and usable to test any consumer. */
export const pingData = z.object({
  message: z.string(),
  endpoint_id: z.string().optional().describe('Set on a test ping: the one webhook endpoint it is sent to'),
});

/** `GET /events`: a cursor page of events. */
export const eventPageView = z.object({
  items: z.array(eventView),
  cursors: z.object({ next: z.string().nullable(), prev: z.string().nullable(), has_next: z.boolean(), has_prev: z.boolean() }),
});

/** `GET /events/types`: the catalogue, each type with the JSON Schema of its `data`. */
export const eventTypesView = z.object({
  items: z.array(z.object({
    name: z.string(), description: z.string(), plugin: z.string(), schema: z.record(z.string(), z.unknown()),
    outbound: z.boolean().describe('Whether webhook endpoints may subscribe to it (false: only in the log and its subscriptions)'),
  })),
});
