/**
 * The public API of plugin-api-server: everything a plugin needs, inside this repository or in
 * its own (`import { definePlugin, defineRoute, z } from 'plugin-api-server'`). What is not
 * exported here is internal and may change without notice. See docs/plugins.md, "A plugin in its
 * own repository".
 *
 * zod and mongoose are re-exported so a plugin uses the server's own copies: a second copy
 * installed by the plugin would make `instanceof` checks and mongoose's model registry disagree.
 */

// Ambient augmentations core relies on (ctx.request.body from the JSON parser, node's globals):
// named here so a program that only imports this entry point sees them too.
/// <reference types="node" />
import type {} from '@koa/bodyparser';
// The services and hook events of the built-in plugins (declaration merging of `Services` and
// `HookEvents`), so `services.get('audit')` and friends are typed in a plugin's own program.
import type {} from './plugins/identity/index.ts';
import type {} from './core/observability/metrics.ts';
import type {} from './plugins/events/index.ts';
import type {} from './plugins/events/realtime/index.ts';
import type {} from './plugins/audit/index.ts';
import type {} from './plugins/payments/index.ts';
import type {} from './plugins/privacy/index.ts';
import type {} from './plugins/webhooks/index.ts';

// --- plugins and their contributions
export { definePlugin, PluginError } from './core/plugin.ts';
export type {
  HealthCheck, JobDefinition, JobRunContext, KernelView, PersonalDataDeclaration, Plugin, PluginContext,
  PluginContribution, PluginSpec,
} from './core/plugin.ts';
export type { Services } from './core/services.ts';
export type { JobRunner } from './plugins/jobs/public/runner.ts';
export type { ServiceRegistry } from './core/services.ts';
export { HealthCheckFailure } from './core/health.ts';
export type { Config } from './config/index.ts';
export type { Logger } from './core/logger.ts';

// --- actors and tenants
export { hasSystemScope, isAdmin, isSystemActor, requestOf, systemActor, writeTenantId } from './core/context.ts';
export type { Actor, RequestContext } from './core/context.ts';
export type { Tenancy } from './core/tenancy.ts';
export { requireFeatures, requireRole, ROLE_REQUIRED_MESSAGE } from './core/access.ts';
export type { AccessPolicy, AttributeRule, Filter, RequiredRole } from './core/access.ts';

// --- hooks
export { onHook } from './core/hooks.ts';
export type {
  BeforeHandler, Doc, DocumentEventBase, HookBus, HookEvents, HookHandler, HookName, HookRegistration,
} from './core/hooks.ts';

// --- errors
export {
  AccessDeniedError, AppError, AuthRequiredError, BadRequestError, ConflictError, ErrorCode, NotFoundError, RateLimitedError,
  ServiceUnavailableError, ValidationError, parseInput, zodIssues,
} from './core/errors.ts';
export type { CatalogueEntry, ErrorCodeDoc, ErrorCodes, ErrorDetails, ValidationIssue } from './core/errors.ts';

// --- REST
export { defineRoute } from './core/http/route.ts';
export type { HandlerArgs, HttpMethod, RouteAuth, RouteBudget, RouteDef, RouteDocs } from './core/http/route.ts';
export { idParams, objectId, pageQuery } from './core/http/schemas.ts';
export { pageHeaderDocs, pageOf, pageSchema, setPageHeaders } from './lib/page.ts';
export type { Page } from './lib/page.ts';

// --- GraphQL
export { givenArgs, pageObject, scopes } from './core/graphql.ts';
export type { ActorContext, Builder, GraphQLContext } from './core/graphql.ts';
export { PERMISSIONS, permit } from './core/permissions.ts';
export type { Permission, Permissions } from './core/permissions.ts';

// --- database
export { modelOn } from './core/db.ts';

// --- events
export type { EventConsumer, EventHead, EventRecord, EventTypeDefinition } from './plugins/events/public/contributions.ts';
export type { EventLog } from './plugins/events/index.ts';
export { StreamEnd, unsettle } from './plugins/events/public/live.ts';
export type { LiveSource, LiveSubscriptions } from './plugins/events/public/live.ts';
export type { OutboxEntry, OutboxSource } from './plugins/events/public/outbox.ts';
export { DocumentChanges, notRemoved, OUTBOX_FIELD, outboxPath } from './plugins/events/public/outbox.ts';
export type { ChangeTypes } from './plugins/events/public/outbox.ts';

// --- resources (a mongoose schema + a path = a REST + GraphQL API)
export { defineResource } from './plugins/resources/index.ts';
export type { CascadeRule, ResourceDefinition, ResourceOptions, ResourceService, ResourcesApi } from './plugins/resources/index.ts';

// --- the server's own zod and mongoose
export { z } from 'zod';
export { default as mongoose, Schema, Types } from 'mongoose';
export type { Connection, InferSchemaType, Model } from 'mongoose';
