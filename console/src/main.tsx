import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, onSignedOut, session } from './lib/api.js';
import { events } from './lib/events.js';
import { problemOf, useStreamState } from './lib/hooks.js';
import type { Problem } from './lib/types.js';
import { ProblemBox } from './components.js';
import { DevicesView } from './views/devices.js';
import { DeviceView } from './views/device.js';
import { EventsView } from './views/events.js';
import { ServersView } from './views/servers.js';
import { HealthView } from './views/health.js';
import { EnrollmentsView } from './views/enrollments.js';
import { AssistantView } from './views/assistant.js';
import { EndpointsView } from './views/endpoints.js';
import { ConversationsView } from './views/conversations.js';
import { JobsView } from './views/jobs.js';
import { SchedulesView } from './views/schedules.js';
import './style.css';

/** Views with no parameter: the hash is their name. */
const PLAIN = ['events', 'servers', 'health', 'enrollments', 'endpoints', 'conversations', 'jobs', 'schedules'] as const;
type Plain = (typeof PLAIN)[number];
type Route =
  { view: 'devices' } | { view: 'device'; id: string } | { view: Plain } | { view: 'job'; id: string } | { view: 'assistant'; deviceId: string | undefined };

/** Hash routes (#/devices/aa:bb:..): deep links work behind any prefix, with no server rewrite. */
function parseRoute(hash: string): Route {
  const parts = hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  if (parts[0] === 'devices' && parts[1]) return { view: 'device', id: parts[1] };
  if (parts[0] === 'assistant') return { view: 'assistant', deviceId: parts[1] || undefined };
  if (parts[0] === 'jobs' && parts[1]) return { view: 'job', id: parts[1] };
  if ((PLAIN as readonly string[]).includes(parts[0] ?? '')) return { view: parts[0] as Plain };
  return { view: 'devices' };
}

function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const on = () => setRoute(parseRoute(location.hash));
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return route;
}

function SignIn({ onDone }: { onDone: () => void }) {
  const [problem, setProblem] = useState<Problem>();
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    const key = (new FormData(e.currentTarget as HTMLFormElement).get('key') ?? '').toString().trim();
    setBusy(true);
    try {
      // Any authenticated read proves the key; the smallest page of devices is cheap.
      await api('GET', '/v1/devices?limit=1', undefined, { key });
      session.signIn(key);
      onDone();
    } catch (err) {
      setProblem(problemOf(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <main id="main" class="signin">
      <h1>Voxgate console</h1>
      <form onSubmit={submit}>
        <label for="key">API key</label>
        <input id="key" name="key" type="password" autocomplete="current-password" required aria-describedby="key-help" />
        <p id="key-help" class="muted">
          One of the gateway's <code>GATEWAY_API_KEYS</code>. It stays in this tab only (session storage).
        </p>
        <p class="muted small key-where">
          No key set? At its first start the gateway generated one, printed it once, and keeps it in <code>secrets.json</code> in its data directory (
          <code>data/secrets.json</code> where it was started, or <code>$GATEWAY_DATA_DIR/secrets.json</code>; readable by its owner only).
        </p>
        <button type="submit" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
        {problem && <ProblemBox problem={problem} label="Sign-in failed" />}
      </form>
    </main>
  );
}

const NAV: Array<[Route['view'], string, string]> = [
  ['devices', '#/devices', 'Devices'],
  ['enrollments', '#/enrollments', 'Enrollments'],
  ['events', '#/events', 'Events'],
  ['conversations', '#/conversations', 'Conversations'],
  ['jobs', '#/jobs', 'Jobs'],
  ['schedules', '#/schedules', 'Schedules'],
  ['servers', '#/servers', 'Servers'],
  ['endpoints', '#/endpoints', 'Endpoints'],
  ['assistant', '#/assistant', 'Assistant'],
  ['health', '#/health', 'Health'],
];

function StreamStatus() {
  const s = useStreamState();
  const label = { connecting: 'connecting…', live: 'live', paused: 'paused', retrying: 'reconnecting…', stopped: 'stopped' }[s.status];
  return (
    <span class={`stream ${s.status}`} role="status" title={s.error ?? ''}>
      Events: {label}
    </span>
  );
}

/** While the stream is down the page cannot know what changed: said once, above every view. */
function StreamBanner() {
  const s = useStreamState();
  if (!s.stale) return null;
  return (
    <div class="banner" role="alert" data-testid="stream-banner">
      {s.status === 'paused'
        ? 'Events are paused: device states on this page are not updated (resume on the Events page).'
        : `The event stream is down (${s.status === 'stopped' ? 'stopped' : 'reconnecting'}): device states are unknown until it is back.`}
      {s.error && <span class="muted small"> {s.error}</span>}
    </div>
  );
}

function App() {
  const [signedIn, setSignedIn] = useState(() => session.key() !== null);
  const route = useRoute();
  useEffect(() => onSignedOut(() => setSignedIn(false)), []);
  useEffect(() => {
    if (!signedIn) return;
    events.start();
    return () => events.stop();
  }, [signedIn]);
  if (!signedIn) return <SignIn onDone={() => setSignedIn(true)} />;
  const current = route.view === 'device' ? 'devices' : route.view === 'job' ? 'jobs' : route.view;
  return (
    <>
      {/* Not href="#main": the hash is the route. */}
      <a
        class="skip"
        href={location.hash || '#/devices'}
        onClick={(e) => {
          e.preventDefault();
          document.getElementById('main')?.focus();
        }}
      >
        Skip to content
      </a>
      <header>
        <strong class="brand">Voxgate</strong>
        <nav aria-label="Main">
          {NAV.map(([view, href, label]) => (
            <a href={href} aria-current={current === view ? 'page' : undefined}>
              {label}
            </a>
          ))}
        </nav>
        <StreamStatus />
        <button class="link" type="button" onClick={() => session.signOut()}>
          Sign out
        </button>
      </header>
      <StreamBanner />
      <main id="main" tabIndex={-1}>
        {route.view === 'devices' && <DevicesView />}
        {route.view === 'device' && <DeviceView id={route.id} />}
        {route.view === 'enrollments' && <EnrollmentsView />}
        {route.view === 'events' && <EventsView />}
        {route.view === 'servers' && <ServersView />}
        {route.view === 'endpoints' && <EndpointsView />}
        {route.view === 'conversations' && <ConversationsView />}
        {route.view === 'jobs' && <JobsView />}
        {route.view === 'job' && <JobsView id={route.id} />}
        {route.view === 'schedules' && <SchedulesView />}
        {route.view === 'health' && <HealthView />}
        {/* Keyed by the device: binding another device starts a fresh chat. */}
        {route.view === 'assistant' && <AssistantView key={route.deviceId ?? ''} deviceId={route.deviceId} />}
      </main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
