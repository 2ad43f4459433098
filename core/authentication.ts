/**
 * The kernel's side of authentication: what the request pipeline (HTTP middleware, GraphQL over
 * WebSocket, event streams) needs to turn a presented credential into an {@link Actor}. The
 * identity plugin implements it and provides it as the service `authentication`; the kernel and
 * every transport call it through that contract, never the plugin's internals.
 */
import { hash } from 'node:crypto';
import type { Actor } from './context.ts';

/** Every API key starts with it (`ak_…`); the rate limiter and failure counter key on a prefix. */
export const API_KEY_PREFIX = 'ak_';

/** The stored form of an API key: its SHA-256, hex (the one-shot `hash`: no Hash object per request). */
export const hashKey = (key: string): string => hash('sha256', key, 'hex');

/** Resolves credentials to actors (cached for `AUTH_CACHE_TTL_MS`). */
export interface Authenticator {
  /**
   * @param hash the key's {@link hashKey}, when the caller computed it already
   * @throws AuthRequiredError (401) for an unknown, revoked or expired key, or a disabled user
   */
  authenticateApiKey(key: string, hash?: string): Promise<Actor>;
  /**
   * The actor of an API key this process resolved and still caches, without a promise (the
   * request pipeline's common case), recording the key's use as `authenticateApiKey` does;
   * undefined when not cached: then `authenticateApiKey` decides.
   * @param hash the key's {@link hashKey}
   */
  cachedApiKey?(hash: string): Actor | undefined;
  /** @throws AuthRequiredError (401) for an invalid or expired token, or a disabled user */
  authenticateToken(token: string): Promise<Actor>;
}
