/**
 * Transports a plugin adds to the kernel's GraphQL pipeline (GraphQL over WebSocket, shared
 * subscription results), and the shapes they put into the GraphQL context. The kernel collects
 * every plugin's `transport` contribution once at start-up.
 */
import type { Server } from 'node:http';
import type { Plugin as YogaPlugin, YogaServerInstance } from 'graphql-yoga';
import type { Authenticator } from './authentication.ts';
import type { Logger } from './logger.ts';

/** The credential a stream was opened with, kept to check it again while the stream lasts. */
export interface PresentedCredential {
  /** `X-API-Key` (or `apiKey` of a graphql-ws `connection_init`). */
  apiKey?: string;
  /** The bearer token of `Authorization: Bearer ...`. */
  token?: string;
  /** `X-Tenant-Id` of a system administrator. */
  tenantId?: string;
}

/** What the kernel hands a transport attaching to its HTTP server. */
export interface TransportSetup {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  yoga: YogaServerInstance<any, any>;
  authentication: Authenticator;
  // `guards` (the OperationGuards HTTP requests pass) is declared by core/guards.ts, which this file
  // may not import: guards reach idempotency, which reaches core/plugin.ts, which names this file.
  maxInputDepth: number;
  log: Logger;
}

/** A plugin's additions to the GraphQL pipeline (`PluginContribution.transport`). */
export interface GraphqlTransport {
  /** Yoga (envelop) plugins run after the kernel's own, built once the schema is. */
  yogaPlugins?(): YogaPlugin[];
  /** Attaches to the HTTP server when it listens (e.g. its `upgrade` event); returns what closes it. */
  attach?(server: Server, setup: TransportSetup): () => Promise<void>;
  /** At shutdown, before in-flight requests are awaited: ends streams that never finish by themselves. */
  drain?(): void;
}

/**
 * A graphql-ws subscription's socket (the WebSocket transport puts it in the operation's context): its group
 * writes the subscription's `next` messages to it directly, rather than through graphql-ws's
 * per-message loop and envelop's per-result mapping.
 */
export interface FrameSink {
  /**
   * Writes one `next` message per payload (the JSON of a result without errors), in order, in one
   * write. Undefined when little is buffered; past the socket's high-water mark, a promise that
   * settles once they have left: the member waits, and its queue grows toward REALTIME_MAX_QUEUE
   * (then its stream ends, 503), as graphql-ws's own loop waits for each write.
   */
  next(payloads: Buffer[]): Promise<void> | undefined;
}
