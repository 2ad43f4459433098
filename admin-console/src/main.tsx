/** Entry point: the shell (sign-in, navigation by role) and the hash router. */
import { render, type ComponentType } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { actingTenant, endSession, isAdmin, isSystem, run, session, signedOutReason } from './api.ts';
import { loadCaps, PLUGIN_SCREENS, rootFields, visibleScreens } from './caps.ts';
import { Busy, ErrorBox, focusOn, Loading, Toasts, toast, useAsync, waitFor } from './ui.tsx';
import { Tenants } from './graphql.ts';
import { SignIn } from './signin.tsx';
import { AcceptInvitation } from './invitation.tsx';
import { Overview } from './screens/overview.tsx';
import { ResourcesScreen } from './screens/resources.tsx';
import { AuditScreen } from './screens/audit.tsx';
import { IdentityScreen } from './screens/identity.tsx';
import { AccountScreen } from './screens/account.tsx';

function useRoute(): string[] {
  const parse = () => location.hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  const [route, setRoute] = useState(parse);
  useEffect(() => {
    const on = () => setRoute(parse());
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return route;
}

type Screen = ComponentType<{ route: string[] }>;
/** The plugin screens, each its own chunk: loaded when first opened. */
const LOADERS: Record<string, () => Promise<{ default: Screen }>> = {
  roles: () => import('./screens/roles.tsx'),
  events: () => import('./screens/events.tsx'),
  webhooks: () => import('./screens/webhooks.tsx'),
  inbound: () => import('./screens/inbound.tsx'),
  jobs: () => import('./screens/jobs.tsx'),
  payments: () => import('./screens/payments.tsx'),
  privacy: () => import('./screens/privacy.tsx'),
  files: () => import('./screens/files.tsx'),
};

function Lazy({ id, route }: { id: string; route: string[] }) {
  const [mod, setMod] = useState<{ id: string; C: Screen } | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    waitFor(LOADERS[id]!()).then((m) => setMod({ id, C: m.default }), setError);
  }, [id]);
  if (error) return <ErrorBox error={error} />;
  if (!mod || mod.id !== id) return <Loading when />;
  return <mod.C route={route} />;
}

/**
 * After a navigation (and after signing in), focus goes to the new screen's heading, so keyboard and
 * screen-reader users start there: the `<h1>` when the screen changed, the section's `<h2>` when
 * only its part did (a list → a document → its form). A screen still loading its data gets the
 * focus when its heading appears, unless the user has moved the focus meanwhile: the focus is
 * compared with where it was when the navigation rendered, since this effect runs a frame later and
 * someone quicker (or a password manager) may already be in a field of the new screen.
 */
function useFocusOnNavigation(key: string | null) {
  const last = useRef<string | null>(null);
  const pending = useRef<{ key: string | null; from: Element | null } | null>(null);
  // Read during the render of the navigation, once: later renders before the effect would read a field chosen meanwhile.
  if (key !== last.current && pending.current?.key !== key) pending.current = { key, from: document.activeElement };
  useEffect(() => {
    const before = last.current;
    last.current = key;
    const from = pending.current?.from ?? null;
    pending.current = null;
    if (key === null || key === before) return;
    const sameScreen = before !== null && before.split('/')[0] === key.split('/')[0];
    const main = document.getElementById('main');
    if (!main) return;
    const moved = () => document.activeElement !== null && document.activeElement !== from && document.activeElement !== document.body;
    if (moved()) return;
    const target = () => (sameScreen ? main.querySelector<HTMLElement>('section[aria-labelledby] h2') : null) ?? main.querySelector<HTMLElement>('h1');
    if (focusOn(target())) return;
    const observer = new MutationObserver(() => {
      if (moved()) return observer.disconnect();
      if (focusOn(target())) observer.disconnect();
    });
    observer.observe(main, { childList: true, subtree: true });
    const stop = setTimeout(() => observer.disconnect(), 5000);
    return () => {
      clearTimeout(stop);
      observer.disconnect();
    };
  }, [key]);
}

function App() {
  const s = session.value;
  const route = useRoute();
  const [screen = 'overview', ...rest] = route;
  useEffect(() => {
    const title = { overview: 'Overview', resources: 'Resources', audit: 'Audit log', identity: 'Identity', account: 'My account' }[screen] ?? PLUGIN_SCREENS.find((p) => p.id === screen)?.label ?? 'Admin console';
    document.title = `${title} · Admin console`;
  }, [screen]);
  useEffect(() => loadCaps(), [s?.token]);
  useFocusOnNavigation(s ? route.join('/') || 'overview' : null);
  useEffect(() => { if (!s) actingTenant.value = null; }, [s]);
  // An invitation's link opens its page, signed in or not.
  if (screen.startsWith('invitation')) return <AcceptInvitation />;
  if (!s) return <SignIn reason={signedOutReason.value} />;
  const admin = isAdmin(s.user);
  const plugins = visibleScreens(s.user);
  const nav = [
    ['overview', 'Overview'],
    ['resources', 'Resources'],
    ...(admin ? [['audit', 'Audit log'], ['identity', 'Identity']] : []),
    ...plugins.map((p) => [p.id, p.label]),
    ['account', 'My account'],
  ] as const;
  const groups: { name: string; items: (typeof nav)[number][] }[] = [];
  for (const item of nav) {
    const name = GROUP[item[0]] ?? 'More';
    // A plugin screen joins its area wherever it comes in the list (Files goes beside Resources).
    const group = groups.find((g) => g.name === name);
    if (group) group.items.push(item);
    else groups.push({ name, items: [item] });
  }
  const role = isSystem(s.user) ? 'system administrator' : admin ? 'tenant administrator' : 'user';
  let body;
  if (screen === 'resources') body = <ResourcesScreen route={rest} />;
  else if (screen === 'audit' && admin) body = <AuditScreen />;
  else if (screen === 'identity' && admin) body = <IdentityScreen />;
  else if (screen === 'account') body = <AccountScreen />;
  else if (plugins.some((p) => p.id === screen)) body = <Lazy id={screen} route={rest} />;
  else if (!rootFields.value && screen in LOADERS) body = <Loading when />;
  else body = <Overview />;
  const acting = actingTenant.value;
  return (
    <div class="shell">
      <a class="skip" href="#main" onClick={(e) => { e.preventDefault(); document.getElementById('main')?.focus(); }}>
        Skip to content
      </a>
      <header class="top">
        <span class="brand">Admin console</span>
        {isSystem(s.user) && <TenantSwitcher />}
        <span class="who">
          <span data-testid="who">{s.user.email}</span> <span class="badge">{role}</span>{' '}
          <button type="button" class="link" onClick={() => endSession('Signed out.')}>
            Sign out
          </button>
        </span>
        <Busy />
      </header>
      <nav aria-label="Main" class="side">
        {groups.map((g) => (
          <div key={g.name} class="group">
            <p class="group-name" aria-hidden="true">{g.name}</p>
            <ul aria-label={g.name}>
              {g.items.map(([id, label]) => (
                <li key={id}>
                  <a href={`#/${id}`} aria-current={screen === id ? 'page' : undefined}>
                    {label}
                  </a>
                </li>
              ))}
            </ul>
          </div>
        ))}
      </nav>
      <main id="main" tabIndex={-1} key={acting?.id ?? 'all'}>
        {acting && <p class="acting" data-testid="acting">Acting for tenant <strong>{acting.name}</strong>: lists and changes are this tenant's.</p>}
        {body}
      </main>
      <Toasts />
    </div>
  );
}

/** The areas of the side navigation, by screen. */
const GROUP: Record<string, string> = {
  overview: 'Content', resources: 'Content', files: 'Content',
  audit: 'Administration', identity: 'Administration', roles: 'Administration',
  events: 'Integrations', webhooks: 'Integrations', inbound: 'Integrations',
  jobs: 'Operations',
  payments: 'Business', privacy: 'Business',
  account: 'You',
};

/** A system administrator acts for one tenant (every request carries `X-Tenant-Id`) or for all. */
function TenantSwitcher() {
  const tenants = useAsync(() => run(Tenants).then((r) => r.tenants.filter((t) => !t.is_system)), []);
  const acting = actingTenant.value;
  return (
    <span class="switcher">
      <label for="acting-tenant">Tenant</label>
      <select id="acting-tenant" value={acting?.id ?? ''} onChange={(e) => {
        const id = e.currentTarget.value;
        const t = tenants.data?.find((x) => x.id === id);
        actingTenant.value = t ? { id: t.id, name: t.name } : null;
        toast(t ? `Acting for ${t.name}` : 'Back to every tenant');
      }}>
        <option value="">All tenants</option>
        {(tenants.data ?? []).map((t) => <option key={t.id} value={t.id}>{t.name}</option>)}
      </select>
    </span>
  );
}

render(<App />, document.getElementById('app')!);
