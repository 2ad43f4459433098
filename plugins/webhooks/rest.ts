/** REST routes of outbound webhooks (`/webhook-endpoints`): each calls the endpoint service. */
import { defineRoute, type RouteDef } from '../../core/http/route.ts';
import { idParams } from '../../core/http/schemas.ts';
import { pageHeaderDocs, setPageHeaders } from '../../lib/page.ts';
import {
  createEndpointInput, deliveryListQuery, deliveryPage, deliveryParams, deliveryView, endpointListQuery, endpointPage, endpointView,
  endpointWithSecret, updateEndpointInput,
} from './schemas.ts';
import { ENDPOINT_PERMISSIONS, type EndpointService } from './endpoints.ts';

const tags = ['webhook-endpoints'];
/** Administrators of the tenant (403 for others, 404 for another tenant's ids). */
const errors = [403, 404];

/** The `/webhook-endpoints` routes, mounted by index.ts when `WEBHOOKS_ENABLED` is on. */
export function outboundRoutes(svc: EndpointService): RouteDef[] {
  return [
    defineRoute({
      method: 'POST', path: '/webhook-endpoints', auth: ENDPOINT_PERMISSIONS.create, tags, status: 201, body: createEndpointInput, response: endpointWithSecret, docs: { errors: [403] },
      summary: 'Create an endpoint; the answer holds its signing secret, shown only this once',
      description: 'A type outside the event catalogue, or a URL whose host is or resolves to a private, loopback, link-local or metadata address, is refused (422).',
      handler: ({ actor: actor, body }) => svc.create(actor, body),
    }),
    defineRoute({
      method: 'GET', path: '/webhook-endpoints', auth: ENDPOINT_PERMISSIONS.list, tags, query: endpointListQuery, response: endpointPage,
      summary: "The tenant's endpoints, newest first (never with a secret)",
      docs: { responseHeaders: pageHeaderDocs('Endpoints of the tenant'), errors: [403] },
      handler: async ({ actor: actor, query, ctx }) => setPageHeaders(ctx, await svc.list(actor, query)),
    }),
    defineRoute({
      method: 'GET', path: '/webhook-endpoints/:id', auth: ENDPOINT_PERMISSIONS.get, tags, params: idParams, response: endpointView, docs: { errors }, summary: 'One endpoint',
      handler: ({ actor: actor, params }) => svc.get(actor, params.id),
    }),
    defineRoute({
      method: 'PATCH', path: '/webhook-endpoints/:id', auth: ENDPOINT_PERMISSIONS.update, tags, params: idParams, body: updateEndpointInput, response: endpointView, docs: { errors },
      summary: 'Change the url, event types, description or enabled flag',
      handler: ({ actor: actor, params, body }) => svc.update(actor, params.id, body),
    }),
    defineRoute({
      method: 'DELETE', path: '/webhook-endpoints/:id', auth: ENDPOINT_PERMISSIONS.remove, tags, params: idParams, status: 204, docs: { errors }, summary: 'Delete an endpoint and its deliveries',
      handler: async ({ actor: actor, params }) => {
        await svc.remove(actor, params.id);
      },
    }),
    defineRoute({
      method: 'POST', path: '/webhook-endpoints/:id/rotate-secret', auth: ENDPOINT_PERMISSIONS.rotateSecret, tags, params: idParams, response: endpointWithSecret, docs: { errors },
      summary: 'Replace the signing secret; the old one keeps signing too for WEBHOOK_SECRET_ROTATION_OVERLAP_SECONDS',
      handler: ({ actor: actor, params }) => svc.rotateSecret(actor, params.id),
    }),
    defineRoute({
      method: 'POST', path: '/webhook-endpoints/:id/test', auth: ENDPOINT_PERMISSIONS.test, tags, params: idParams, response: deliveryView, docs: { errors },
      summary: 'Send a ping event to this endpoint only, now; answers the delivery after the attempt',
      handler: ({ actor: actor, params }) => svc.test(actor, params.id),
    }),
    defineRoute({
      method: 'GET', path: '/webhook-endpoints/:id/deliveries', auth: ENDPOINT_PERMISSIONS.deliveries, tags, params: idParams, query: deliveryListQuery, response: deliveryPage,
      summary: "The endpoint's deliveries, newest first",
      docs: { responseHeaders: pageHeaderDocs('Deliveries of the endpoint'), errors },
      handler: async ({ actor: actor, params, query, ctx }) => setPageHeaders(ctx, await svc.deliveries(actor, params.id, query)),
    }),
    defineRoute({
      method: 'POST', path: '/webhook-endpoints/:id/deliveries/:delivery_id/retry', auth: ENDPOINT_PERMISSIONS.retry, tags, params: deliveryParams, response: deliveryView,
      docs: { errors: [...errors, 409] },
      summary: 'Send a delivery again now; answers it after the attempt',
      handler: ({ actor: actor, params }) => svc.retry(actor, params.id, params.delivery_id),
    }),
  ];
}
