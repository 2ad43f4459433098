/** Small shared pieces: async loading with a delayed spinner, error boxes with the request id, links. */
import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api.ts';

export interface Async<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  reload: () => void;
}

/** Runs `load` when `deps` change; `loading` stays true until it settles. */
export function useAsync<T>(load: () => Promise<T>, deps: unknown[]): Async<T> {
  const [state, setState] = useState<{ data: T | undefined; error: unknown; loading: boolean }>({ data: undefined, error: null, loading: true });
  const [tick, setTick] = useState(0);
  const seq = useRef(0);
  useEffect(() => {
    const mine = ++seq.current;
    setState((s) => ({ ...s, loading: true, error: null }));
    load().then(
      (data) => mine === seq.current && setState({ data, error: null, loading: false }),
      (error: unknown) => mine === seq.current && setState((s) => ({ data: s.data, error, loading: false })),
    );
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((n) => n + 1), []);
  return { ...state, reload };
}

/** "Loading…" shown only when the wait exceeds 300 ms, so fast answers do not flicker. */
export function Loading({ when }: { when: boolean }) {
  const [show, setShow] = useState(false);
  useEffect(() => {
    if (!when) return setShow(false);
    const t = setTimeout(() => setShow(true), 300);
    return () => clearTimeout(t);
  }, [when]);
  return show ? <p class="loading" role="status" aria-live="polite">Loading…</p> : null;
}

/** An error with its code and request id, for support. */
export function ErrorBox({ error }: { error: unknown }) {
  if (!error) return null;
  const e = error instanceof ApiError ? error : null;
  return (
    <div class="error" role="alert">
      <strong>{e?.code === 'ACCESS_DENIED' ? 'Not allowed: ' : 'Error: '}</strong>
      {error instanceof Error ? error.message : String(error)}
      {e && (
        <small class="muted">
          {' '}
          ({e.code}
          {e.requestId ? `, request_id ${e.requestId}` : ''})
        </small>
      )}
    </div>
  );
}

export function Notice({ children }: { children: ComponentChildren }) {
  return (
    <div class="notice" role="status">
      {children}
    </div>
  );
}

export const fmtDate = (v: unknown) => (typeof v === 'string' && v ? new Date(v).toLocaleString('en-GB', { timeZone: 'UTC' }) + ' UTC' : '');

export const show = (v: unknown): string => {
  if (v === null || v === undefined) return '';
  if (Array.isArray(v)) return v.map(show).join(', ');
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
};

/** Navigates within the console (hash routes, so no /admin/* API path is shadowed). */
export const go = (path: string) => {
  location.hash = `#${path}`;
};

/** Downloads `text` as a file (no inline script: a Blob URL). */
export function download(name: string, type: string, text: string) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

/** JSON, pretty-printed, in a focusable scroll box (keyboard users can scroll it). */
export function Json({ value, label }: { value: unknown; label: string }) {
  return (
    <pre class="json" tabIndex={0} aria-label={label} data-testid="json">
      {JSON.stringify(value, null, 2)}
    </pre>
  );
}

/** Sub-navigation of a screen (hash links). */
export function Tabs({ label, items, current }: { label: string; items: [string, string][]; current: string }) {
  return (
    <nav aria-label={label} class="tabs">
      {items.map(([href, text]) => (
        <a key={href} href={`#${href}`} aria-current={current === href ? 'page' : undefined}>{text}</a>
      ))}
    </nav>
  );
}

/** Runs actions one at a time, keeping the last error (shown with ErrorBox) and a busy flag. */
export function useAction(): { error: unknown; busy: boolean; act: (fn: () => Promise<unknown>, ...after: (() => void)[]) => Promise<boolean>; setError: (e: unknown) => void } {
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const act = async (fn: () => Promise<unknown>, ...after: (() => void)[]) => {
    setError(null);
    setBusy(true);
    try {
      await fn();
      after.forEach((f) => f());
      return true;
    } catch (e) {
      setError(e);
      return false;
    } finally {
      setBusy(false);
    }
  };
  return { error, busy, act, setError };
}

/** The server's VALIDATION_ERROR messages by field (the last element of each `loc`). */
export const fieldErrors = (error: unknown): Record<string, string> => {
  const out: Record<string, string> = {};
  if (error instanceof ApiError && error.code === 'VALIDATION_ERROR') for (const i of error.issues) out[String(i.loc[i.loc.length - 1])] ??= i.msg;
  return out;
};

/** Money exactly as the server gives it (a decimal string), formatted for its currency. */
export const money = (amount: string | null | undefined, currency: string | null | undefined): string => {
  if (amount == null) return '';
  try {
    return new Intl.NumberFormat('en-US', { style: 'currency', currency: currency ?? 'USD' }).format(amount as unknown as number);
  } catch {
    return `${amount} ${currency ?? ''}`;
  }
};

/** A progress bar with its percentage in words. */
export function Progress({ value, label }: { value: number; label: string }) {
  const v = Math.max(0, Math.min(100, Math.round(value)));
  return (
    <div class="progress-row">
      <progress max={100} value={v} aria-label={label} data-testid="progress" />
      <span data-testid="progress-text">{v}%</span>
    </div>
  );
}
