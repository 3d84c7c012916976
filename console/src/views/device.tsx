import { useState } from 'preact/hooks';
import { ApiError, api, devicePath } from '../lib/api.js';
import { events } from '../lib/events.js';
import { useHistory } from '../lib/history.js';
import { problemOf, useCoalesced, useLoad, useOnEvent, useStale, useStreamState, type Loaded } from '../lib/hooks.js';
import type { Device, EnrolledDevice, PendingEnrollment, Problem, ToolList } from '../lib/types.js';
import type { DeviceMeta } from '../lib/fleet-types.js';
import { Ago, CatalogWarning, DeviceStatus, Json, Loading, ProblemBox } from '../components.js';
import { ToolCard, deviceToolPath } from './tool-form.js';
import { MetaPanel, QueuedCallsPanel } from './device-fleet.js';
import { ConversationPanel } from './conversations.js';
import { EnrollmentRow } from './enrollments.js';
import { FirmwarePanel, PhotosPanel } from './device-media.js';
import { chatLink } from './assistant.js';

/** One device: its tools first (searchable, callable), then what it is, its settings, calls, conversation, enrollment, media and events. */
export function DeviceView({ id }: { id: string }) {
  const device = useLoad((signal) => api<Device & Partial<DeviceMeta>>('GET', devicePath(id), undefined, { signal }), [id]);
  const tools = useLoad((signal) => api<ToolList>('GET', `${devicePath(id)}/tools`, undefined, { signal }), [id]);
  const reloadDevice = useCoalesced(device.reload, 400);
  const reloadTools = useCoalesced(tools.reload, 400);
  const stale = useStale(() => (reloadDevice(), reloadTools()));
  useOnEvent((e) => {
    if (e === 'resync') return (reloadDevice(), reloadTools());
    if (e.deviceId !== device.data?.id || !e.type.startsWith('device.')) return;
    reloadDevice();
    if (e.type === 'device.ready' || e.type === 'device.tools_changed' || e.type === 'device.catalog_incomplete' || e.type === 'device.offline') reloadTools();
  });
  // This device's past events (where the gateway keeps history): the timeline and the conversation start with them.
  useHistory(24, id);
  const d = device.data;
  return (
    <section aria-labelledby="device-h">
      <p>
        <a href="#/devices">← Devices</a>
      </p>
      <h1 id="device-h">
        Device <code>{d?.id ?? id}</code>
      </h1>
      {d?.name && (
        <p class="device-name">
          {d.name}
          {d.room ? ` · ${d.room}` : ''}
        </p>
      )}
      <p class="toolbar">
        {d && <DeviceStatus online={d.online} state={d.state} stale={stale} />}
        {d?.online && <CatalogWarning warning={d.catalogWarning} />}
        <a class="chat-link" href={chatLink(d?.id ?? id)}>
          Chat with this device
        </a>
      </p>
      {device.problem && <ProblemBox problem={device.problem} />}
      {!d && device.loading && <Loading what="the device" />}
      <ToolsPanel deviceId={d?.id} tools={tools} />
      {d && (
        <section class="card" aria-labelledby="facts-h">
          <h2 id="facts-h">About this device</h2>
          <dl class={`facts ${d.online ? '' : 'offline'}`}>
            {d.online && d.catalogWarning && (
              <>
                <dt>Catalog</dt>
                <dd class="catalog-warning">{d.catalogWarning}</dd>
              </>
            )}
            <dt>Transport</dt>
            <dd>{d.transport === 'mqtt' ? 'MQTT' : 'WebSocket'}</dd>
            <dt>Firmware</dt>
            <dd class="firmware">{d.firmwareVersion ?? 'unknown'}</dd>
            <dt>Board</dt>
            <dd>{d.server ? `${d.server.name} ${d.server.version}` : (d.board ?? 'unknown')}</dd>
            <dt>MCP protocol</dt>
            <dd>{d.protocolVersion ?? '—'}</dd>
            <dt>Client id</dt>
            <dd>
              <code>{d.clientId}</code>
            </dd>
            {d.firstSeenAt && (
              <>
                <dt>First seen</dt>
                <dd>
                  <Ago iso={d.firstSeenAt} />
                </dd>
              </>
            )}
            <dt>Connected</dt>
            <dd>
              <Ago iso={d.connectedAt} />
            </dd>
            <dt>Last seen</dt>
            <dd>
              <Ago iso={d.lastSeenAt} />
            </dd>
            <dt>Pending calls</dt>
            <dd>{d.pendingCalls}</dd>
          </dl>
        </section>
      )}
      {d && <MetaPanel device={d} onSaved={device.reload} />}
      {d && <QueuedCallsPanel deviceId={d.id} tools={tools.data?.tools ?? []} />}
      {d && <ConversationPanel deviceId={d.id} />}
      <EnrollmentPanel id={d?.id ?? id} />
      {d && <FirmwarePanel id={d.id} running={d.firmwareVersion} />}
      {d && <PhotosPanel id={d.id} />}
      {d && <RawRpc id={d.id} />}
      {d && <Timeline id={d.id} />}
    </section>
  );
}

/** The device's tools at the top of its page, with a search over names, titles and descriptions. */
function ToolsPanel({ deviceId, tools }: { deviceId: string | undefined; tools: Loaded<ToolList> }) {
  const [search, setSearch] = useState('');
  const all = tools.data?.tools ?? [];
  const needle = search.trim().toLowerCase();
  const shown = needle
    ? all.filter((t) =>
        [t.name, t.description, typeof t.annotations?.['title'] === 'string' ? t.annotations['title'] : ''].some((s) => s.toLowerCase().includes(needle)),
      )
    : all;
  return (
    <section aria-labelledby="tools-h">
      <div class="toolbar">
        <h2 id="tools-h">Tools {tools.data && <span class="muted">({needle ? `${shown.length} of ${all.length}` : all.length})</span>}</h2>
        {all.length > 0 && (
          <label class="inline">
            Search tools <input type="search" value={search} onInput={(e) => setSearch(e.currentTarget.value)} placeholder="name or description" />
          </label>
        )}
      </div>
      {tools.problem && <ProblemBox problem={tools.problem} label="Tools unavailable" />}
      {!tools.data && tools.loading && <Loading what="tools" />}
      {needle && shown.length === 0 && <p class="muted">No tool matches “{search}”.</p>}
      {/* The catalog hash keys the cards: a changed catalog gets fresh forms. */}
      <div class="tools" key={tools.data?.hash}>
        {deviceId && shown.map((t) => <ToolCard key={t.name} tool={t} callPath={deviceToolPath(deviceId, t.name)} />)}
      </div>
    </section>
  );
}

/** Where the device stands with enrollment: enrolled (how), waiting for approval, or auth open. */
function EnrollmentPanel({ id }: { id: string }) {
  const binding = useLoad(
    async (signal) => {
      try {
        return await api<EnrolledDevice>('GET', `/v1/enrollments/devices/${encodeURIComponent(id)}`, undefined, { signal });
      } catch (e) {
        if (e instanceof ApiError && e.problem.code === 'ENROLLMENT_NOT_FOUND') return e.problem;
        throw e;
      }
    },
    [id],
  );
  const pending = useLoad(
    (signal) => api<{ enrollments: PendingEnrollment[] }>('GET', `/v1/enrollments?device=${encodeURIComponent(id)}`, undefined, { signal }),
    [id],
  );
  const mine = pending.data?.enrollments ?? [];
  const b = binding.data;
  const [decided, setDecided] = useState<string>();
  const reload = (message: string) => (setDecided(message), binding.reload(), pending.reload());
  return (
    <section class="card" aria-labelledby="enroll-h">
      <h2 id="enroll-h">Enrollment</h2>
      {binding.problem && <ProblemBox problem={binding.problem} />}
      <p role="status" class="ok">
        {decided}
      </p>
      {b && 'via' in b && (
        <p class="enrolled">
          Enrolled via <strong>{b.via}</strong> <Ago iso={b.enrolledAt} />; credentials {b.delivered ? 'collected by the device' : 'not collected yet'}.
        </p>
      )}
      {/* ENROLLMENT_NOT_FOUND covers both "not enrolled" and "device auth is open"; its detail tells which. */}
      {b && 'code' in b && (
        <p class="muted">{(b as Problem).detail.includes('"open"') ? 'Device auth is open: devices need no enrollment.' : 'Not enrolled.'}</p>
      )}
      {mine.length > 0 && (
        <ul class="enrollments">
          {mine.map((p) => (
            <EnrollmentRow key={p.code} pending={p} onDone={reload} />
          ))}
        </ul>
      )}
    </section>
  );
}

/** Raw JSON-RPC to the device, for engineers (POST /v1/devices/{id}/rpc). */
function RawRpc({ id }: { id: string }) {
  const [method, setMethod] = useState('tools/list');
  const [params, setParams] = useState('{}');
  const [out, setOut] = useState<{ result: unknown } | { problem: Problem }>();
  const [busy, setBusy] = useState(false);
  const send = async (e: Event) => {
    e.preventDefault();
    let parsed: unknown;
    try {
      parsed = params.trim() ? JSON.parse(params) : undefined;
    } catch {
      return setOut({ problem: { type: 'about:blank', title: 'Invalid JSON', status: 0, code: 'CLIENT', detail: 'params is not valid JSON' } });
    }
    setBusy(true);
    try {
      setOut(await api<{ result: unknown }>('POST', `${devicePath(id)}/rpc`, { method, ...(parsed === undefined ? {} : { params: parsed }) }));
    } catch (err) {
      setOut({ problem: problemOf(err) });
    } finally {
      setBusy(false);
    }
  };
  return (
    <details class="card">
      <summary>
        <h2>Raw JSON-RPC</h2>
      </summary>
      <form onSubmit={send}>
        <div class="field">
          <label for="rpc-method">method</label>
          <input id="rpc-method" value={method} maxLength={256} required onInput={(e) => setMethod(e.currentTarget.value)} />
        </div>
        <div class="field">
          <label for="rpc-params">params (JSON object)</label>
          <textarea id="rpc-params" rows={4} value={params} spellcheck={false} onInput={(e) => setParams(e.currentTarget.value)} />
        </div>
        <button type="submit" disabled={busy}>
          Send
        </button>
      </form>
      <div aria-live="polite">
        {out && 'problem' in out && <ProblemBox problem={out.problem} />}
        {out && 'result' in out && <Json value={out.result} />}
      </div>
    </details>
  );
}

/** The device's events: its history where the gateway keeps one, then the page's live stream; newest first. */
function Timeline({ id }: { id: string }) {
  useStreamState();
  const mine = events
    .recent()
    .filter((e) => e.deviceId === id)
    .slice(0, 100);
  return (
    <section class="card" aria-labelledby="timeline-h">
      <h2 id="timeline-h">Timeline</h2>
      {mine.length === 0 && <p class="muted">No event from this device yet.</p>}
      <ol class="timeline">
        {mine.map((e) => (
          <li key={e.id}>
            <time dateTime={e.at}>{new Date(e.at).toLocaleTimeString()}</time> <code>{e.type}</code>
            {Object.keys(e.data).length > 0 && (
              <details>
                <summary>data</summary>
                <Json value={e.data} />
              </details>
            )}
          </li>
        ))}
      </ol>
    </section>
  );
}
