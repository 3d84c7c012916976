import { useState } from 'preact/hooks';
import { api, devicePath } from '../lib/api.js';
import { OUTCOME_TEXT, conversationOf, timingsText, type Line } from '../lib/conversation.js';
import { useHistory } from '../lib/history.js';
import { useAction, useLoad, useStreamState } from '../lib/hooks.js';
import type { DeviceSettings } from '../lib/types.js';
import { Badge, Loading, ProblemBox } from '../components.js';

/** Lines shown at most: the newest. */
const SHOW = 200;

/**
 * Conversations (voice.mode "converse"), live: what each device heard, the tools its turn ran and what it
 * answered, with the timings the gateway measured. From the page's events (history first, where kept).
 */
export function ConversationsView() {
  const stream = useStreamState();
  useHistory(24);
  const [device, setDevice] = useState('');
  const needle = device.trim().toLowerCase();
  const lines = conversationOf(stream.recent().filter((e) => e.type.startsWith('voice.') && (!needle || e.deviceId.includes(needle))));
  return (
    <section aria-labelledby="conv-h">
      <h1 id="conv-h">Conversations</h1>
      <p class="muted">
        Devices whose voice mode is <code>converse</code> talk to the gateway's assistant: each turn appears here as it happens. Set a device's mode on its
        page.
      </p>
      <div class="filters">
        <label>
          Device
          <input type="search" value={device} onInput={(e) => setDevice(e.currentTarget.value)} placeholder="aa:bb:…" />
        </label>
      </div>
      <ConversationLog lines={lines} showDevice />
    </section>
  );
}

/** On a device's page: its voice mode, and its conversation. */
export function ConversationPanel({ deviceId }: { deviceId: string }) {
  const stream = useStreamState();
  const lines = conversationOf(stream.recent().filter((e) => e.deviceId === deviceId && e.type.startsWith('voice.')));
  return (
    <section class="card" aria-labelledby="voice-h">
      <h2 id="voice-h">Conversation</h2>
      <VoiceMode deviceId={deviceId} />
      <ConversationLog lines={lines} showDevice={false} />
    </section>
  );
}

const MODES = [
  ['', "default (the tenant's or voice.mode)"],
  ['converse', 'converse: Voxgate answers'],
  ['relay', 'relay: to the voice server'],
  ['off', 'off: no voice sessions'],
] as const;

/** PATCH /v1/devices/{id} {voiceMode}; an empty body reads the settings without changing them. */
function VoiceMode({ deviceId }: { deviceId: string }) {
  const settings = useLoad((signal) => api<DeviceSettings>('PATCH', devicePath(deviceId), {}, { signal }), [deviceId]);
  const { busy, problem, run } = useAction();
  const set = (value: string) =>
    run(async () => {
      await api<DeviceSettings>('PATCH', devicePath(deviceId), { voiceMode: value === '' ? null : value });
      settings.reload();
    });
  const s = settings.data;
  return (
    <div class="toolbar voice-mode">
      {settings.problem && <ProblemBox problem={settings.problem} label="Voice mode unavailable" />}
      {!s && settings.loading && <Loading what="the voice mode" />}
      {s && (
        <>
          <label>
            Voice mode{' '}
            <select value={s.voiceMode ?? ''} disabled={busy} onChange={(e) => void set(e.currentTarget.value)}>
              {MODES.map(([v, label]) => (
                <option key={v} value={v}>
                  {label}
                </option>
              ))}
            </select>
          </label>
          <span class="muted small effective-mode">
            Next session: <strong>{s.effectiveVoiceMode}</strong>
          </span>
        </>
      )}
      {problem && <ProblemBox problem={problem} label="Not changed" />}
    </div>
  );
}

function ConversationLog({ lines, showDevice }: { lines: Line[]; showDevice: boolean }) {
  if (lines.length === 0) return <p class="muted">No conversation yet.</p>;
  return (
    <ol class="transcript voice" role="log" aria-live="polite" aria-label="Conversation">
      {lines.slice(-SHOW).map((l) => (
        <li key={l.id} class={l.kind === 'heard' ? 'msg user' : l.kind === 'reply' ? 'msg assistant' : `tool-line ${l.state}`} data-voice={l.kind}>
          {showDevice && (
            <a class="small who" href={`#/devices/${encodeURIComponent(l.deviceId)}`}>
              {l.deviceId}
            </a>
          )}{' '}
          <time class="muted small" dateTime={l.at}>
            {new Date(l.at).toLocaleTimeString()}
          </time>{' '}
          {l.kind === 'heard' && (
            <>
              <span class="sr-only">Heard: </span>
              <span class="text">{l.text}</span>
            </>
          )}
          {l.kind === 'tool' && (
            <>
              {l.state === 'running' ? 'Calling tool ' : 'Tool '}
              <code>{l.name}</code>
              {l.state === 'running'
                ? '…'
                : `${l.state === 'ok' ? ' completed' : ' failed'}${l.durationMs !== undefined ? ` in ${Math.round(l.durationMs)} ms` : ''}`}
            </>
          )}
          {l.kind === 'reply' && (
            <>
              <span class="sr-only">Answered: </span>
              <span class="text">{l.text}</span>
              {l.outcome !== 'answered' && <Badge tone="warn">{OUTCOME_TEXT[l.outcome] ?? l.outcome}</Badge>}
              {timingsText(l.timings) && <div class="muted small timings">{timingsText(l.timings)}</div>}
            </>
          )}
        </li>
      ))}
    </ol>
  );
}
