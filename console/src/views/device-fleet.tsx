import { useState } from 'preact/hooks';
import { api, devicePath } from '../lib/api.js';
import { isMissingRoute, useCapabilities } from '../lib/capabilities.js';
import { metaPatch, parseArgs } from '../lib/fleet.js';
import type { DeviceMeta, DeviceMetaSettings, QueuedCall, QueuedCallList } from '../lib/fleet-types.js';
import { problemOf, useCoalesced, useLoad, useOnEvent } from '../lib/hooks.js';
import type { Device, Problem, Tool } from '../lib/types.js';
import { Ago, Badge, NotAvailable, ProblemBox } from '../components.js';
import { ResultView } from './tool-form.js';

/**
 * Name, room and tags of a device (FLEET-API.md: PATCH /v1/devices/{id}). A gateway whose device records
 * carry no tags keeps no such metadata: the panel says so instead of offering a form that would be refused.
 */
export function MetaPanel({ device, onSaved }: { device: Device & Partial<DeviceMeta>; onSaved: () => void }) {
  const kept = Array.isArray(device.tags);
  const [form, setForm] = useState(() => ({ name: device.name ?? '', room: device.room ?? '', tags: (device.tags ?? []).join(', ') }));
  const [outcome, setOutcome] = useState<{ saved: true } | { problem: Problem } | { invalid: string }>();
  const [busy, setBusy] = useState(false);
  const save = async (e: Event) => {
    e.preventDefault();
    const body = metaPatch(form);
    if (!body.ok) return setOutcome({ invalid: body.message });
    setBusy(true);
    try {
      const out = await api<DeviceMetaSettings>('PATCH', devicePath(device.id), body.value);
      setForm({ name: out.name ?? '', room: out.room ?? '', tags: (out.tags ?? []).join(', ') });
      setOutcome({ saved: true });
      onSaved();
    } catch (err) {
      setOutcome({ problem: problemOf(err) });
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="card" aria-labelledby="meta-h">
      <h2 id="meta-h">Name, room and tags</h2>
      {!kept ? (
        <NotAvailable what="Naming devices (name, room, tags)" />
      ) : (
        <form class="meta-form" onSubmit={save}>
          <div class="field">
            <label for="meta-name">Name</label>
            <input
              id="meta-name"
              value={form.name}
              maxLength={64}
              placeholder="living-room speaker"
              onInput={(e) => setForm((f) => ({ ...f, name: e.currentTarget.value }))}
            />
          </div>
          <div class="field">
            <label for="meta-room">Room</label>
            <input
              id="meta-room"
              value={form.room}
              maxLength={64}
              placeholder="kitchen"
              onInput={(e) => setForm((f) => ({ ...f, room: e.currentTarget.value }))}
            />
          </div>
          <div class="field">
            <label for="meta-tags">Tags</label>
            <input
              id="meta-tags"
              value={form.tags}
              placeholder="speaker, floor-1"
              aria-describedby="meta-tags-help"
              onInput={(e) => setForm((f) => ({ ...f, tags: e.currentTarget.value }))}
            />
            <p id="meta-tags-help" class="muted small">
              Comma separated; each 1-32 letters, digits, _ . : - (at most 32). An empty field clears.
            </p>
          </div>
          <button type="submit" disabled={busy}>
            Save
          </button>
          <div aria-live="polite">
            {outcome && 'saved' in outcome && <p class="ok">Saved.</p>}
            {outcome && 'invalid' in outcome && <p class="invalid">{outcome.invalid}</p>}
            {outcome && 'problem' in outcome && <ProblemBox problem={outcome.problem} label="Not saved" />}
          </div>
        </form>
      )}
    </section>
  );
}

const callTone = (s: QueuedCall['state']) => (s === 'succeeded' ? 'ok' : s === 'failed' || s === 'expired' ? 'bad' : s === 'cancelled' ? 'off' : 'info');

/**
 * Calls queued for the device (FLEET-API.md): delivered when it is online and free, kept across restarts.
 * Queue one, see each one's state (live from call.state events), cancel one not yet finished.
 */
export function QueuedCallsPanel({ deviceId, tools }: { deviceId: string; tools: Tool[] }) {
  const caps = useCapabilities();
  const available = caps?.has('get', '/v1/devices/{id}/calls') ?? true;
  const list = useLoad(
    async (signal) => {
      if (!available) return undefined;
      try {
        return await api<QueuedCallList>('GET', `${devicePath(deviceId)}/calls?limit=20`, undefined, { signal });
      } catch (e) {
        if (isMissingRoute(e)) return undefined;
        throw e;
      }
    },
    [deviceId, available],
  );
  const reload = useCoalesced(list.reload, 300);
  useOnEvent((e) => {
    if (e === 'resync' || (e.type === 'call.state' && e.deviceId === deviceId)) reload();
  });
  const [tool, setTool] = useState('');
  const [args, setArgs] = useState('');
  const [ttl, setTtl] = useState('');
  const [outcome, setOutcome] = useState<{ queued: string } | { problem: Problem } | { invalid: string }>();
  const queue = async (e: Event) => {
    e.preventDefault();
    const parsed = parseArgs(args);
    if (!tool.trim()) return setOutcome({ invalid: 'tool: required' });
    if (!parsed.ok) return setOutcome({ invalid: parsed.message });
    const ttlS = ttl.trim() ? Number(ttl) : undefined;
    if (ttlS !== undefined && !(ttlS > 0)) return setOutcome({ invalid: 'time to live: seconds above 0' });
    try {
      const body = { tool: tool.trim(), arguments: parsed.value, ...(ttlS !== undefined ? { ttlMs: Math.round(ttlS * 1000) } : {}) };
      const call = await api<QueuedCall>('POST', `${devicePath(deviceId)}/calls`, body);
      setOutcome({ queued: call.id });
      list.reload();
    } catch (err) {
      setOutcome({ problem: problemOf(err) });
    }
  };
  const cancel = async (id: string) => {
    try {
      await api('DELETE', `/v1/calls/${encodeURIComponent(id)}`);
      list.reload();
    } catch (err) {
      setOutcome({ problem: problemOf(err) });
    }
  };
  const unavailable = !available || (list.data === undefined && !list.loading && !list.problem);
  return (
    <details class="card" data-testid="queued-calls">
      <summary>
        <h2>Queued calls</h2>
      </summary>
      {unavailable ? (
        <NotAvailable what="Queuing calls" />
      ) : (
        <>
          <p class="muted small">A queued call waits until the device is online and free (a WebSocket device: its next voice session), then runs once.</p>
          <form class="queue-form" onSubmit={queue}>
            <div class="field">
              <label for="q-tool">Tool</label>
              <input id="q-tool" list="q-tools" value={tool} maxLength={128} required onInput={(e) => setTool(e.currentTarget.value)} />
              <datalist id="q-tools">
                {tools.map((t) => (
                  <option key={t.name} value={t.name} />
                ))}
              </datalist>
            </div>
            <div class="field">
              <label for="q-args">Arguments (JSON object)</label>
              <textarea id="q-args" rows={2} value={args} spellcheck={false} placeholder='{"volume": 40}' onInput={(e) => setArgs(e.currentTarget.value)} />
            </div>
            <div class="field">
              <label for="q-ttl">Time to live (seconds; empty: the gateway's default)</label>
              <input id="q-ttl" type="number" min={1} step="any" value={ttl} onInput={(e) => setTtl(e.currentTarget.value)} />
            </div>
            <button type="submit">Queue call</button>
          </form>
          <div aria-live="polite">
            {outcome && 'queued' in outcome && <p class="ok">Queued ({outcome.queued}).</p>}
            {outcome && 'invalid' in outcome && <p class="invalid">{outcome.invalid}</p>}
            {outcome && 'problem' in outcome && <ProblemBox problem={outcome.problem} />}
          </div>
          {list.problem && <ProblemBox problem={list.problem} label="Could not list calls" />}
          {list.data && list.data.calls.length === 0 && <p class="muted">No queued call.</p>}
          <ul class="calls">
            {list.data?.calls.map((c) => (
              <li key={c.id} data-call={c.id} data-state={c.state}>
                <Badge tone={callTone(c.state)}>{c.state}</Badge> <code>{c.tool}</code>{' '}
                <span class="muted small">
                  queued <Ago iso={c.createdAt} />,{' '}
                  {c.state === 'queued' || c.state === 'sent' ? (
                    <>
                      expires <Ago iso={c.expiresAt} />
                    </>
                  ) : (
                    <>
                      updated <Ago iso={c.updatedAt} />
                    </>
                  )}
                  {c.jobId && (
                    <>
                      {' '}
                      · job <a href={`#/jobs/${encodeURIComponent(c.jobId)}`}>{c.jobId.slice(0, 8)}</a>
                    </>
                  )}
                </span>
                {(c.state === 'queued' || c.state === 'sent') && (
                  <button type="button" class="secondary small" onClick={() => void cancel(c.id)} aria-label={`Cancel call ${c.tool} ${c.id}`}>
                    Cancel
                  </button>
                )}
                {Object.keys(c.arguments ?? {}).length > 0 && <code class="args"> {JSON.stringify(c.arguments).slice(0, 200)}</code>}
                {c.result && <ResultView result={c.result} />}
                {c.error && (
                  <p class="invalid">
                    <code>{c.error.code}</code> {c.error.message}
                  </p>
                )}
              </li>
            ))}
          </ul>
        </>
      )}
    </details>
  );
}
