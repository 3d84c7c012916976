import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../lib/api.js';
import { useCoalesced, useLoad, useOnEvent } from '../lib/hooks.js';
import type { DeviceList } from '../lib/types.js';
import { Badge, CatalogWarning, Loading, ProblemBox, ago } from '../components.js';

const PAGE = 25;
/** How long a device that just came online stays highlighted. */
const HIGHLIGHT_MS = 10_000;

/** The fleet: a page of devices at a time, filtered on the server, searched within the page, live. */
export function DevicesView() {
  const [online, setOnline] = useState('');
  const [transport, setTransport] = useState('');
  const [search, setSearch] = useState('');
  // Cursor pages: the stack holds the cursor of each page visited, for "Previous".
  const [cursors, setCursors] = useState<string[]>([]);
  const cursor = cursors[cursors.length - 1];
  const list = useLoad((signal) => {
    const q = new URLSearchParams({ limit: String(PAGE) });
    if (online) q.set('online', online);
    if (transport) q.set('transport', transport);
    if (cursor) q.set('cursor', cursor);
    return api<DeviceList>('GET', `/v1/devices?${q}`, undefined, { signal });
  }, [online, transport, cursor]);

  const [fresh, setFresh] = useState<ReadonlySet<string>>(new Set());
  const timers = useRef(new Map<string, ReturnType<typeof setTimeout>>());
  useEffect(() => () => timers.current.forEach(clearTimeout), []);
  const reload = useCoalesced(list.reload, 400);
  useOnEvent((e) => {
    if (e === 'resync') return reload();
    if (e.type === 'device.notification' || e.type === 'device.message' || e.type === 'device.photo') return;
    reload();
    if (e.type !== 'device.online') return;
    setFresh((s) => new Set(s).add(e.deviceId));
    clearTimeout(timers.current.get(e.deviceId));
    timers.current.set(
      e.deviceId,
      setTimeout(() => {
        timers.current.delete(e.deviceId);
        setFresh((s) => {
          const n = new Set(s);
          n.delete(e.deviceId);
          return n;
        });
      }, HIGHLIGHT_MS),
    );
  });

  const needle = search.trim().toLowerCase();
  const devices = (list.data?.devices ?? []).filter(
    (d) => !needle || [d.id, d.clientId, d.firmwareVersion ?? '', d.server?.name ?? '', d.state].some((s) => s.toLowerCase().includes(needle)),
  );
  const filtered = online !== '' || transport !== '' || cursor !== undefined;
  const resetPaging = () => setCursors([]);

  return (
    <section aria-labelledby="devices-h">
      <h1 id="devices-h">Devices</h1>
      <form class="filters" onSubmit={(e) => e.preventDefault()} role="search">
        <label>
          Status
          <select value={online} onChange={(e) => (setOnline(e.currentTarget.value), resetPaging())}>
            <option value="">all</option>
            <option value="true">online</option>
            <option value="false">offline</option>
          </select>
        </label>
        <label>
          Transport
          <select value={transport} onChange={(e) => (setTransport(e.currentTarget.value), resetPaging())}>
            <option value="">all</option>
            <option value="websocket">WebSocket</option>
            <option value="mqtt">MQTT</option>
          </select>
        </label>
        <label>
          Search this page
          <input type="search" value={search} onInput={(e) => setSearch(e.currentTarget.value)} placeholder="id, client id, firmware, board" />
        </label>
      </form>
      {list.problem && <ProblemBox problem={list.problem} label="Could not list devices" />}
      {!list.data && list.loading && <Loading what="devices" />}
      {list.data && list.data.devices.length === 0 && !filtered && <EmptyFleet />}
      {list.data && (list.data.devices.length > 0 || filtered) && (
        <div class="table-wrap">
          <table class="devices">
            <caption class="sr-only">Devices, {online === 'true' ? 'online' : online === 'false' ? 'offline' : 'all'}; updated live</caption>
            <thead>
              <tr>
                <th scope="col">Device</th>
                <th scope="col">Status</th>
                <th scope="col">Transport</th>
                <th scope="col">Firmware / board</th>
                <th scope="col">Tools</th>
                <th scope="col">Pending calls</th>
                <th scope="col">Last seen</th>
              </tr>
            </thead>
            <tbody>
              {devices.map((d) => (
                <tr key={d.id} class={`${d.online ? '' : 'offline'} ${fresh.has(d.id) && d.online ? 'fresh' : ''}`} data-device={d.id}>
                  <th scope="row">
                    <a href={`#/devices/${encodeURIComponent(d.id)}`}>{d.id}</a>
                    <div class="muted small">{d.clientId}</div>
                  </th>
                  <td>
                    {d.online ? <Badge tone={d.state === 'ready' ? 'ok' : 'warn'}>{d.state === 'ready' ? 'online' : d.state}</Badge> : <Badge tone="off">offline</Badge>}
                    {d.online && <CatalogWarning warning={d.catalogWarning} />}
                    {fresh.has(d.id) && d.online && <span class="sr-only"> (just came online)</span>}
                  </td>
                  <td>{d.transport === 'mqtt' ? 'MQTT' : 'WebSocket'}</td>
                  <td>
                    {d.firmwareVersion ?? '—'}
                    {d.server && <div class="muted small">{d.server.name}</div>}
                  </td>
                  <td class="num">{d.toolCount}</td>
                  <td class="num">{d.pendingCalls}</td>
                  <td>
                    <time dateTime={d.lastSeenAt} title={d.lastSeenAt}>
                      {ago(d.lastSeenAt)}
                    </time>
                  </td>
                </tr>
              ))}
              {devices.length === 0 && (
                <tr>
                  <td colSpan={7} class="muted">
                    No device on this page matches.
                  </td>
                </tr>
              )}
            </tbody>
          </table>
        </div>
      )}
      <nav class="pager" aria-label="Pages">
        <button type="button" disabled={cursors.length === 0} onClick={() => setCursors((c) => c.slice(0, -1))}>
          Previous
        </button>
        <button type="button" disabled={!list.data?.nextCursor} onClick={() => list.data?.nextCursor && setCursors((c) => [...c, list.data!.nextCursor!])}>
          Next
        </button>
      </nav>
    </section>
  );
}

/** No device yet: say where to point one, with this gateway's real OTA URL. */
function EmptyFleet() {
  const config = useLoad((signal) => fetch('/console/config.json', { signal }).then((r) => r.json() as Promise<{ otaUrl: string | null }>), []);
  const otaUrl = config.data?.otaUrl ?? new URL('/xiaozhi/ota/', location.origin).href;
  return (
    <div class="empty" role="status">
      <h2>No device has connected yet</h2>
      <p>
        Point a device at <code class="ota-url">{otaUrl}</code>: set it as the OTA URL in the firmware's settings (xiaozhi: <code>CONFIG_OTA_URL</code>), and
        it will ask the gateway where to connect. It appears here as soon as it does.
      </p>
    </div>
  );
}
