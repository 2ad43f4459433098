/** Small shared pieces: async loading with a delayed indicator, dialogs, pagers, error boxes with the request id, links. */
import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { signal } from '@preact/signals';
import { ApiError, pending } from './api.ts';

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

/** Waits shorter than this show no indicator, so fast answers do not make it flash. */
export const SLOW_MS = 300;

/** True once `when` has stayed true for SLOW_MS. */
export function useSlow(when: boolean): boolean {
  const [slow, setSlow] = useState(false);
  useEffect(() => {
    if (!when) return setSlow(false);
    const t = setTimeout(() => setSlow(true), SLOW_MS);
    return () => clearTimeout(t);
  }, [when]);
  return slow;
}

/**
 * The console's one loading announcement: "Loading…" in a polite live region while something (a
 * request, reads and saves alike, or a screen's code) has been awaited longer than 300 ms, with
 * `aria-busy` on `<main>` meanwhile. The region is always in the page, empty when idle, so screen
 * readers announce the change. Only this leaf follows the pending count, so requests re-render
 * nothing else.
 */
export function Busy({ label = 'Loading…' }: { label?: string }) {
  const slow = useSlow(pending.value > 0);
  useEffect(() => {
    const main = document.getElementById('main');
    if (slow) main?.setAttribute('aria-busy', 'true');
    else main?.removeAttribute('aria-busy');
  }, [slow]);
  return <p class="busy" role="status" data-testid="busy">{slow ? label : ''}</p>;
}

/**
 * "Loading…" where a section's data will appear, after 300 ms. Visual only: the announcement is
 * Busy's, so a screen reader hears one "Loading…" rather than one per section.
 */
export function Loading({ when }: { when: boolean }) {
  return useSlow(when) ? <p class="loading" aria-hidden="true">Loading…</p> : null;
}

/** Counts a wait that is not a request (a screen's chunk) as pending, for Busy. */
export async function waitFor<T>(p: Promise<T>): Promise<T> {
  pending.value++;
  try {
    return await p;
  } finally {
    pending.value--;
  }
}

const FOCUSABLE = 'a[href], button:not([disabled]), input:not([disabled]), select:not([disabled]), textarea:not([disabled]), [tabindex]:not([tabindex="-1"])';
/** The elements Tab reaches inside `root`, in order. */
export const focusables = (root: ParentNode): HTMLElement[] => [...root.querySelectorAll<HTMLElement>(FOCUSABLE)].filter((el) => el.getClientRects().length > 0);

/** Moves focus to `el` even when it is not focusable by itself (a heading). */
export function focusOn(el: HTMLElement | null | undefined): boolean {
  if (!el) return false;
  if (!el.matches(FOCUSABLE) && !el.hasAttribute('tabindex')) el.setAttribute('tabindex', '-1');
  el.focus();
  return document.activeElement === el;
}

let dialogSeq = 0;

/**
 * A modal dialog: the native `<dialog>` opened with showModal (the page behind it is inert),
 * labelled by its title. Focus goes to its first control (or to `[data-autofocus]`), Tab and
 * Shift+Tab cycle inside it, Escape closes it, and focus returns to the element that opened it.
 * Rendering it opens it; the parent closes it by not rendering it (`onClose` asks for that).
 */
export function Dialog({ title, onClose, children, testId }: { title: string; onClose: () => void; children: ComponentChildren; testId?: string }) {
  const ref = useRef<HTMLDialogElement>(null);
  const [titleId] = useState(() => `dlg-${++dialogSeq}`);
  const close = useRef(onClose);
  close.current = onClose;
  useEffect(() => {
    const d = ref.current!;
    const opener = document.activeElement instanceof HTMLElement ? document.activeElement : null;
    // Escape (and the browser's other close requests) fire `cancel`: the parent decides, the dialog stays in sync.
    const cancel = (e: Event) => {
      e.preventDefault();
      close.current();
    };
    d.addEventListener('cancel', cancel);
    d.showModal();
    focusOn(d.querySelector<HTMLElement>('[data-autofocus]') ?? focusables(d)[0] ?? d);
    return () => {
      d.removeEventListener('cancel', cancel);
      if (d.open) d.close();
      if (!(opener?.isConnected && focusOn(opener))) focusOn(document.querySelector<HTMLElement>('main h1'));
    };
  }, []);
  const onKeyDown = (e: KeyboardEvent) => {
    if (e.key === 'Escape') {
      e.preventDefault();
      close.current();
      return;
    }
    if (e.key !== 'Tab') return;
    const all = focusables(ref.current!);
    const first = all[0];
    const last = all[all.length - 1];
    if (!first || !last) return e.preventDefault();
    const at = document.activeElement;
    if (e.shiftKey && (at === first || !ref.current!.contains(at))) {
      e.preventDefault();
      last.focus();
    } else if (!e.shiftKey && (at === last || !ref.current!.contains(at))) {
      e.preventDefault();
      first.focus();
    }
  };
  return (
    <dialog ref={ref} class="dialog" aria-labelledby={titleId} onKeyDown={onKeyDown} data-testid={testId}>
      <h2 id={titleId}>{title}</h2>
      {children}
    </dialog>
  );
}

/**
 * Asks before a consequential action, in a Dialog: Cancel (focused first) or `confirmLabel`, which
 * runs `onConfirm`; its error is shown in the dialog, and success closes it.
 */
export function ConfirmDialog({ title, confirmLabel, onConfirm, onClose, children }: { title: string; confirmLabel: string; onConfirm: () => Promise<unknown>; onClose: () => void; children: ComponentChildren }) {
  const { error, busy, act } = useAction();
  return (
    <Dialog title={title} onClose={onClose} testId="confirm">
      <form onSubmit={(e) => { e.preventDefault(); if (!busy) void act(onConfirm, onClose); }}>
        <p>{children}</p>
        <ErrorBox error={error} />
        <p class="actions">
          <button type="button" onClick={onClose}>Cancel</button>
          <button type="submit" aria-disabled={busy ? 'true' : undefined}>{confirmLabel}</button>
        </p>
      </form>
    </Dialog>
  );
}

/** Previous / next of an offset page, with "Page x of y". */
export function Pager({ label, page, totalPages, onPage }: { label: string; page: number; totalPages: number; onPage: (p: number) => void }) {
  return (
    <nav class="pager" aria-label={label}>
      {/* aria-disabled rather than disabled: the button that just reached the last page keeps the focus. */}
      <button type="button" aria-disabled={page <= 1 ? 'true' : undefined} onClick={() => page > 1 && onPage(page - 1)}>Previous page</button>
      <span>Page {page} of {Math.max(1, totalPages)}</span>
      <button type="button" aria-disabled={page >= totalPages ? 'true' : undefined} onClick={() => page < totalPages && onPage(page + 1)}>Next page</button>
    </nav>
  );
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

const UNITS: [Intl.RelativeTimeFormatUnit, number][] = [['year', 31_536_000], ['month', 2_592_000], ['day', 86_400], ['hour', 3600], ['minute', 60], ['second', 1]];
const rtf = new Intl.RelativeTimeFormat('en', { numeric: 'auto', style: 'short' });
/** "3 min ago", "in 2 hr", "now" for an ISO time, measured from `now`. */
export function relative(v: string, now = Date.now()): string {
  const s = (new Date(v).getTime() - now) / 1000;
  if (Math.abs(s) < 5) return 'now';
  const [unit, size] = UNITS.find(([, n]) => Math.abs(s) >= n) ?? UNITS[UNITS.length - 1]!;
  return rtf.format(Math.round(s / size), unit);
}

/** A time shown relative ("3 min ago"), the exact time (UTC) on hover and to screen readers' `datetime`. */
export function Time({ v }: { v: unknown }) {
  if (typeof v !== 'string' || !v) return null;
  return <time dateTime={v} title={fmtDate(v)} class="time">{relative(v)}</time>;
}

/** An id shortened to its last 6 characters (all of it on hover), with a button that copies it. */
export function ShortId({ id, label = 'id' }: { id: string; label?: string }) {
  return (
    <span class="short-id">
      <code title={id}>…{id.slice(-6)}</code>
      <button type="button" class="copy" onClick={() => void navigator.clipboard?.writeText(id).then(() => toast(`Copied ${label} ${id}`), () => toast(`Could not copy; the ${label} is ${id}`, 'bad'))}>
        Copy<span class="sr-only"> {label} {id}</span>
      </button>
    </span>
  );
}

/** A list with nothing in it: what is missing and what to do about it. */
export function Empty({ children }: { children: ComponentChildren }) {
  return <div class="empty" data-testid="empty">{children}</div>;
}

interface Toast { id: number; text: string; kind: 'ok' | 'bad' }
/** The toasts on screen (newest last). */
export const toasts = signal<Toast[]>([]);
let toastSeq = 0;
/** Shows `text` for 5 s (failures 8 s) in the polite toast region. */
export function toast(text: string, kind: 'ok' | 'bad' = 'ok') {
  const id = ++toastSeq;
  toasts.value = [...toasts.value.slice(-3), { id, text, kind }];
  setTimeout(() => { toasts.value = toasts.value.filter((t) => t.id !== id); }, kind === 'bad' ? 8000 : 5000);
}
/** Where toasts appear: always in the page, so screen readers announce each one. */
export function Toasts() {
  return (
    <div class="toasts" role="status" aria-live="polite" data-testid="toasts">
      {toasts.value.map((t) => (
        <p key={t.id} class={`toast ${t.kind}`}>
          {t.text}
          <button type="button" class="link" onClick={() => { toasts.value = toasts.value.filter((x) => x.id !== t.id); }}>Dismiss</button>
        </p>
      ))}
    </div>
  );
}

/**
 * A panel over the right side of the screen (a list stays beside it on wide screens): always in
 * view, with a close button and Escape; focus goes to its heading when it opens.
 */
export function Drawer({ title, onClose, children, testId }: { title: string; onClose: () => void; children: ComponentChildren; testId?: string }) {
  const ref = useRef<HTMLElement>(null);
  const close = useRef(onClose);
  close.current = onClose;
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => { if (e.key === 'Escape' && !document.querySelector('dialog[open]')) close.current(); };
    addEventListener('keydown', onKey);
    return () => removeEventListener('keydown', onKey);
  }, []);
  useEffect(() => { focusOn(ref.current?.querySelector('h2')); }, [title]);
  return (
    <aside ref={ref} class="drawer" aria-label={title} data-testid={testId}>
      <header class="drawer-head">
        <h2>{title}</h2>
        <button type="button" onClick={() => close.current()}>Close<span class="sr-only"> {title}</span></button>
      </header>
      <div class="drawer-body">{children}</div>
    </aside>
  );
}

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
      toast(`Failed: ${e instanceof Error ? e.message : String(e)}`, 'bad');
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

/** Where a detail page sits: links up to the screen and the list it came from, then the page itself. */
export function Crumbs({ items }: { items: [string, string | null][] }) {
  return (
    <nav aria-label="Breadcrumbs" class="crumbs">
      <ol>
        {items.map(([label, href]) => (
          <li key={label}>{href ? <a href={`#${href}`}>{label}</a> : <span aria-current="page">{label}</span>}</li>
        ))}
      </ol>
    </nav>
  );
}

const LABELS: Record<string, string> = { _id: 'ID', etag: 'Version tag', is_deleted: 'Deleted', deleted_at: 'Deleted at', created_at: 'Created', updated_at: 'Last changed' };
/** A field's key in words for a person: `project_id` → "Project id", `_id` → "ID". */
export const fieldLabel = (key: string): string => {
  const known = LABELS[key];
  if (known) return known;
  const words = key.replace(/^_+/, '').replace(/[._]+/g, ' ').replace(/([a-z0-9])([A-Z])/g, '$1 $2').trim().toLowerCase();
  return words ? words.charAt(0).toUpperCase() + words.slice(1) : key;
};

/** A stored value for a person: "(empty)" for nothing, Yes/No, lists joined, nested values indented. */
export function Value({ v }: { v: unknown }) {
  if (v === null || v === undefined || v === '' || (Array.isArray(v) && !v.length)) return <span class="muted">(empty)</span>;
  if (typeof v === 'boolean') return <>{v ? 'Yes' : 'No'}</>;
  if (Array.isArray(v) && v.every((x) => x === null || typeof x !== 'object')) return <>{v.map(String).join(', ')}</>;
  if (typeof v === 'object') return <pre class="value">{JSON.stringify(v, null, 2)}</pre>;
  return <>{String(v)}</>;
}

/**
 * A document's publication state (`_status` of resources with drafts): "Draft" or "Published";
 * nothing for a resource without drafts.
 */
export function StatusBadge({ status }: { status: unknown }) {
  if (status !== 'draft' && status !== 'published') return null;
  return <span class={`pill ${status === 'published' ? 'good' : ''}`} data-testid="status-badge">{status === 'published' ? 'Published' : 'Draft'}</span>;
}
