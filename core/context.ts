import { AsyncLocalStorage } from 'node:async_hooks';
import type { Logger } from './logger.ts';

/** The authenticated caller, as every service and plugin sees it. */
export interface AuthUser {
  id: string;
  email: string;
  name: string;
  tenant_id: string;
  roles: string[];
  /** `system` for system administrators; null otherwise. */
  scope: 'system' | null;
  is_system_user: boolean;
  features: string[];
  attributes: Record<string, unknown>;
}

/** Per-request state, available anywhere below a request through `getContext()`. */
export interface RequestContext {
  requestId: string;
  ip: string | null;
  user: AuthUser | null;
  /**
   * Tenant the request acts in: the user's own tenant, or for a system caller the tenant named in
   * `X-Tenant-Id` (null = all tenants).
   */
  tenantId: string | null;
  log: Logger;
}

const storage = new AsyncLocalStorage<RequestContext>();

export const runWithContext = <T>(ctx: RequestContext, fn: () => T): T => storage.run(ctx, fn);

/** The current request's context, or undefined outside a request (jobs, start-up). */
export const getContext = (): RequestContext | undefined => storage.getStore();

/** True for callers allowed to act across tenants (`scope: system` or `is_system_user`). */
export const isSystemCaller = (user: AuthUser | null | undefined): boolean =>
  !!user && (user.scope === 'system' || user.is_system_user);

export const isAdmin = (user: AuthUser | null | undefined): boolean =>
  !!user && (user.roles.includes('admin') || isSystemCaller(user));
