import { useState } from 'preact/hooks';
import { FLEET_EVENT_TYPES } from '../lib/fleet-types.js';
import { useHistory } from '../lib/history.js';
import { useStreamState } from '../lib/hooks.js';
import { EVENT_TYPES, type GatewayEvent } from '../lib/types.js';
import { Json } from '../components.js';

type AnyType = GatewayEvent['type'];
const ALL_TYPES: readonly AnyType[] = [...EVENT_TYPES, ...FLEET_EVENT_TYPES];

/** The last hour from the gateway's history (where it keeps one), then the live stream, with filters; pause closes the stream, resume reopens it from the last id seen. */
export function EventsView() {
  const stream = useStreamState();
  const history = useHistory(1);
  const [types, setTypes] = useState<ReadonlySet<AnyType>>(new Set(ALL_TYPES));
  const [device, setDevice] = useState('');
  const needle = device.trim().toLowerCase().replace(/[-_]/g, ':');
  const shown = stream.recent().filter((e) => types.has(e.type) && (!needle || e.deviceId.includes(needle)));
  const paused = stream.status === 'paused';
  const toggle = (t: AnyType, on: boolean) =>
    setTypes((s) => {
      const n = new Set(s);
      if (on) n.add(t);
      else n.delete(t);
      return n;
    });
  return (
    <section aria-labelledby="events-h">
      <h1 id="events-h">Events</h1>
      <div class="toolbar">
        <button type="button" onClick={() => (paused ? stream.resume() : stream.pause())} aria-pressed={paused}>
          {paused ? 'Resume' : 'Pause'}
        </button>
        <span class="muted small">
          {paused ? `Paused; resuming replays from ${stream.lastId ?? 'now'}.` : `Last id: ${stream.lastId ?? '—'}`}
          {stream.error && ` · ${stream.error}`}
        </span>
        <span class="muted small history-state" data-state={history?.state ?? 'loading'}>
          {history === undefined
            ? 'Reading history…'
            : history.state === 'loaded'
              ? `History: ${history.count} event${history.count === 1 ? '' : 's'} of the last hour.`
              : history.state === 'unavailable'
                ? 'Event history is not available on this gateway: events since this page opened.'
                : `History could not be read (${history.detail}).`}
        </span>
      </div>
      <fieldset class="filters">
        <legend>Show</legend>
        {ALL_TYPES.map((t) => (
          <label class="check" key={t}>
            <input type="checkbox" checked={types.has(t)} onChange={(e) => toggle(t, e.currentTarget.checked)} /> {t.replace(/^device\./, '')}
          </label>
        ))}
        <label>
          Device
          <input type="search" value={device} onInput={(e) => setDevice(e.currentTarget.value)} placeholder="aa:bb:…" />
        </label>
      </fieldset>
      {shown.length === 0 && <p class="muted">No event yet. Events appear here as devices connect, change and notify.</p>}
      <div class="table-wrap">
        <table class="events">
          <caption class="sr-only">Events, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Time</th>
              <th scope="col">Type</th>
              <th scope="col">Device</th>
              <th scope="col">Data</th>
            </tr>
          </thead>
          <tbody>
            {shown.slice(0, 200).map((e) => (
              <tr key={e.id} data-event-type={e.type}>
                <td>
                  <time dateTime={e.at}>{new Date(e.at).toLocaleTimeString()}</time>
                </td>
                <td>
                  <code>{e.type}</code>
                </td>
                <td>
                  <a href={`#/devices/${encodeURIComponent(e.deviceId)}`}>{e.deviceId}</a>
                </td>
                <td>
                  {Object.keys(e.data).length > 0 && (
                    <details>
                      <summary>{summary(e.data)}</summary>
                      <Json value={e.data} />
                    </details>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}

function summary(data: Record<string, unknown>): string {
  const method = data['method'];
  if (typeof method === 'string') return method.slice(0, 80);
  return Object.keys(data).slice(0, 4).join(', ');
}
