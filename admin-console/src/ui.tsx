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
