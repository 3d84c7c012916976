import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../lib/api.js';
import { useCapabilities } from '../lib/capabilities.js';
import { useCoalesced, useLoad, useOnEvent, useStale } from '../lib/hooks.js';
import type { Device, DeviceList } from '../lib/types.js';
import type { DeviceMeta } from '../lib/fleet-types.js';
import { loopbackHint } from '../lib/lan-hint.js';
import { Ago, CatalogWarning, DeviceStatus, Loading, ProblemBox, Pager } from '../components.js';

/** A device as listed; name, room and tags where the gateway keeps them (FLEET-API.md). */
type Listed = Device & Partial<DeviceMeta>;
/** device.* events that change what the table shows (not messages, notifications, photos: those change no row). */
const RELOADS = new Set(['device.online', 'device.ready', 'device.offline', 'device.tools_changed', 'device.catalog_incomplete']);

const PAGE = 25;
/** How long a device that just came online stays highlighted. */
const HIGHLIGHT_MS = 10_000;

/** The fleet: a page of devices at a time, filtered on the server, searched within the page, live. */
export function DevicesView() {
  const [online, setOnline] = useState('');
  const [transport, setTransport] = useState('');
  const [search, setSearch] = useState('');
  // Server-side filters on the lasting registry's fields, shown only when this gateway's list takes them.
  const [meta, setMeta] = useState({ name: '', room: '', tag: '' });
  const caps = useCapabilities();
  const metaFilters = caps?.query('get', '/v1/devices').has('tag') ?? false;
  // Cursor pages: the stack holds the cursor of each page visited, for "Previous".
  const [cursors, setCursors] = useState<string[]>([]);
  const cursor = cursors[cursors.length - 1];
  const list = useLoad(
    (signal) => {
      const q = new URLSearchParams({ limit: String(PAGE) });
      if (online) q.set('online', online);
      if (transport) q.set('transport', transport);
      if (cursor) q.set('cursor', cursor);
      for (const [k, v] of Object.entries(meta)) if (metaFilters && v.trim()) q.set(k, v.trim());
      return api<DeviceList>('GET', `/v1/devices?${q}`, undefined, { signal });
    },
    [online, transport, cursor, meta, metaFilters],
  );

  const [fresh, setFresh] = useState<ReadonlySet<string>>(new Set());
  const timers = useRef(new Map<string, ReturnType<typeof setTimeout>>());
  useEffect(() => () => timers.current.forEach(clearTimeout), []);
  const reload = useCoalesced(list.reload, 400);
  // Back from an outage: reload, since the events of the gap may not all be replayed.
  const stale = useStale(reload);
  useOnEvent((e) => {
    if (e === 'resync') return reload();
    if (!RELOADS.has(e.type)) return;
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
  const all: Listed[] = list.data?.devices ?? [];
  const devices = all.filter(
    (d) =>
      !needle ||
      [d.id, d.clientId, d.firmwareVersion ?? '', d.server?.name ?? '', d.state, d.name ?? '', d.room ?? '', ...(d.tags ?? [])].some((s) =>
        s.toLowerCase().includes(needle),
      ),
  );
  const hasMeta = metaFilters || all.some((d) => Array.isArray(d.tags));
  const filtered = online !== '' || transport !== '' || cursor !== undefined || Object.values(meta).some((v) => v.trim() !== '');
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
        {metaFilters &&
          (['name', 'room', 'tag'] as const).map((k) => (
            <label key={k}>
              {k === 'tag' ? 'Tag' : k === 'name' ? 'Name' : 'Room'}
              <input
                type="search"
                value={meta[k]}
                maxLength={64}
                placeholder={k === 'tag' ? 'kitchen,speaker' : ''}
                // Committed on Enter or leaving the field: one request per filter, not per keystroke.
                onChange={(e) => (setMeta((m) => ({ ...m, [k]: e.currentTarget.value })), resetPaging())}
              />
            </label>
          ))}
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
                {hasMeta && (
                  <th scope="col" class="meta">
                    Room / tags
                  </th>
                )}
              </tr>
            </thead>
            <tbody>
              {devices.map((d) => (
                <tr key={d.id} class={`${d.online ? '' : 'offline'} ${fresh.has(d.id) && d.online ? 'fresh' : ''}`} data-device={d.id}>
                  <th scope="row">
                    {d.name && <div class="device-name">{d.name}</div>}
                    <a href={`#/devices/${encodeURIComponent(d.id)}`}>{d.id}</a>
                    <div class="muted small">{d.clientId}</div>
                  </th>
                  <td>
                    <DeviceStatus online={d.online} state={d.state} stale={stale} />
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
                    <Ago iso={d.lastSeenAt} />
                  </td>
                  {hasMeta && (
                    <td class="meta">
                      {d.room && <div>{d.room}</div>}
                      {(d.tags ?? []).map((t) => (
                        <span key={t} class="tag">
                          {t}
                        </span>
                      ))}
                    </td>
                  )}
                </tr>
              ))}
              {devices.length === 0 && (
                <tr>
                  <td colSpan={hasMeta ? 8 : 7} class="muted">
                    No device on this page matches.
                  </td>
                </tr>
              )}
            </tbody>
          </table>
        </div>
      )}
      <Pager cursors={cursors} next={list.data?.nextCursor} onChange={setCursors} />
    </section>
  );
}

/**
 * No device yet: say where to point one. `http.publicUrl` when the gateway has one (config.json); else this
 * page's own origin, which is right on the LAN but not when the page was opened on the gateway's host as
 * localhost: then the hint says so (the gateway reports no LAN address to the console).
 */
function EmptyFleet() {
  const config = useLoad((signal) => fetch('/console/config.json', { signal }).then((r) => r.json() as Promise<{ otaUrl: string | null }>), []);
  const otaUrl = config.data?.otaUrl ?? new URL('/xiaozhi/ota/', location.origin).href;
  const hint = config.data && !config.data.otaUrl ? loopbackHint(location.href) : undefined;
  return (
    <div class="empty" role="status">
      <h2>No device has connected yet</h2>
      <p>
        Point a device at <code class="ota-url">{otaUrl}</code>: set it as the OTA URL in the firmware's settings (xiaozhi: <code>CONFIG_OTA_URL</code>), and it
        will ask the gateway where to connect. It appears here as soon as it does.
      </p>
      {hint && (
        <p class="warn-note" data-testid="loopback-hint">
          <strong>{hint.host} is this computer's loopback address: a device cannot reach it.</strong> Use the gateway host's LAN address instead, e.g.{' '}
          <code class="lan-url">{hint.example}</code> (the address of this computer on your Wi-Fi: <code>ip -4 addr</code>, <code>ipconfig</code>), or set{' '}
          <code>http.publicUrl</code> (<code>GATEWAY_PUBLIC_URL</code>) so this page shows it.
        </p>
      )}
    </div>
  );
}
