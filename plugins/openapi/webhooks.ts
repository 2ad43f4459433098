/**
 * OpenAPI 3.1's top-level `webhooks`: one entry per event type of the catalogue, describing the
 * request the server POSTs to a registered webhook endpoint (docs/events.md, "Outbound webhooks"):
 * the Standard Webhooks headers and the body `{id, type, timestamp, data}`, `data` being the
 * type's JSON Schema. No Koa or GraphQL here.
 */
import type { oas31 } from 'openapi3-ts';

/** An event type as the catalogue serves it (`GET /events/types`). */
export interface DocumentedEventType {
  name: string;
  description: string;
  plugin: string;
  schema: Record<string, unknown>;
  /** False for types never sent to endpoints (left out). */
  outbound?: boolean;
}

const header = (name: string, description: string, example: string): oas31.ParameterObject => ({
  name, in: 'header', required: true, description, schema: { type: 'string' }, example,
});

const HEADERS: oas31.ParameterObject[] = [
  header('webhook-id', 'The event id: the same for every attempt of this event (deduplicate on it).', 'evt_65f1c2a9e4b0a1d2c3f4e5a6'),
  header('webhook-timestamp', 'When this attempt was signed, in seconds since the epoch (reject old ones).', '1732540000'),
  header('webhook-signature', 'Standard Webhooks signatures, space-separated `v1,<base64 HMAC-SHA256>`; two during a secret rotation.', 'v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4='),
];

/** The `webhooks` map of the document: `POST` of each event type endpoints may receive, sorted by name. */
export function webhooksOf(types: readonly DocumentedEventType[]): Record<string, oas31.PathItemObject> {
  const out: Record<string, oas31.PathItemObject> = {};
  for (const t of types.filter((x) => x.outbound !== false).sort((a, b) => a.name.localeCompare(b.name))) {
    const { $schema: _dialect, ...data } = t.schema;
    out[t.name] = {
      post: {
        operationId: `webhook_${t.name.replace(/[^A-Za-z0-9]+/g, '_')}`,
        summary: t.description,
        description: `Sent to every enabled webhook endpoint subscribed to \`${t.name}\` (or \`*\`) in the event's tenant. Declared by the \`${t.plugin}\` plugin.`,
        tags: ['webhooks'],
        parameters: HEADERS,
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: {
                type: 'object',
                required: ['id', 'type', 'timestamp', 'data'],
                properties: {
                  id: { type: 'string', description: 'The event id (equals `webhook-id`).' },
                  type: { type: 'string', const: t.name },
                  timestamp: { type: 'string', format: 'date-time', description: 'When the change happened (ISO 8601).' },
                  data: data as oas31.SchemaObject,
                },
              },
            },
          },
        },
        responses: {
          '2XX': { description: 'Delivered. Any other answer, or none within `WEBHOOK_DELIVERY_TIMEOUT_MS`, is a failed attempt, retried on `WEBHOOK_DELIVERY_RETRY_SCHEDULE`.' },
        },
      },
    };
  }
  return out;
}
