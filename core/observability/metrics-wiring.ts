/**
 * The metrics pieces the kernel wires: the series, and the observers of the MongoDB client and of
 * GraphQL operations. The observers take `Metrics`, so metrics.ts cannot build them itself
 * without an import cycle; the kernel hands them the app's `Metrics` instead.
 */
export { Metrics } from './metrics.ts';
export { observeMongo } from './metrics-mongo.ts';
export { observeGraphQL } from './metrics-graphql.ts';
