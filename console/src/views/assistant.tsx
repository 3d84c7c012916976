import { useEffect, useRef, useState } from 'preact/hooks';
import type { ComponentChildren } from 'preact';
import { api } from '../lib/api.js';
import { streamTurn, type AssistantModel, type TurnEvent } from '../lib/assistant.js';
import { problemOf, useLoad } from '../lib/hooks.js';
import type { DeviceList, Problem } from '../lib/types.js';
import { Badge, Loading, ProblemBox } from '../components.js';

/** One line of the transcript: what the person said, the assistant's text, a tool's progress, a question. */
type Entry =
  | { kind: 'user'; id: number; text: string }
  | { kind: 'assistant'; id: number; text: string }
  | {
      kind: 'tool';
      id: number;
      /** The page's own number for the turn (its gateway id may not be known yet). */
      turn: number;
      callId: string;
      name: string;
      args: Record<string, unknown>;
      state: 'running' | 'ok' | 'error' | 'cancelled' | 'interrupted';
      durationMs?: number;
      /** How long the call waited for the person's answer (the gateway's durationMs includes it). */
      waitedMs?: number;
      text?: string;
    }
  | {
      kind: 'confirm';
      id: number;
      turnId: string;
      callId: string;
      name: string;
      args: Record<string, unknown>;
      /** When the question was shown, and when answered (performance.now()): the wait, taken out of the tool's time. */
      askedAt: number;
      answeredAt?: number;
      answer?: 'approved' | 'denied' | 'unanswered';
      problem?: Problem;
    }
  | { kind: 'end'; id: number; outcome: 'failed' | 'cancelled'; problem: Problem };

/** What the page knows of the turn it is streaming. */
interface TurnState {
  seq: number;
  id?: string;
  ended?: boolean;
  cancelled?: boolean;
}

/** The transcript keeps this many entries; older ones fall off (a long session never grows the page without bound). */
const KEEP = 400;
let nextId = 1;
let nextTurn = 1;
const CANCELLED: Problem = { type: 'about:blank', title: 'Cancelled', status: 0, code: 'CANCELLED', detail: 'cancelled by you' };

/**
 * A chat with the gateway's assistant (docs/assistant.md): streamed turns, tool progress, confirmations,
 * cancel, a model picker, and optionally bound to one device (its tools come first).
 */
export function AssistantView({ deviceId }: { deviceId: string | undefined }) {
  const models = useLoad((signal) => api<{ models: AssistantModel[] }>('GET', '/v1/assistant/models', undefined, { signal }), []);
  const list = models.data?.models ?? [];
  if (models.problem)
    return (
      <Frame deviceId={deviceId}>
        <ProblemBox problem={models.problem} />
      </Frame>
    );
  if (!models.data)
    return (
      <Frame deviceId={deviceId}>
        <Loading what="models" />
      </Frame>
    );
  if (list.length === 0)
    return (
      <Frame deviceId={deviceId}>
        <div class="empty" data-testid="no-model">
          <h2>No assistant model is configured</h2>
          <p>
            Name one under <code>assistant.models</code> in <code>gateway.config.json</code> (OpenAI, Anthropic, Gemini, or a local server such as Ollama) and
            restart the gateway. API keys go in environment variables named by <code>apiKeyEnv</code>, never in the file.
          </p>
          <pre>{`"assistant": { "models": { "local": { "provider": "openai", "model": "qwen2.5:7b", "baseUrl": "http://127.0.0.1:11434/v1" } } }`}</pre>
          <p class="muted small">See docs/assistant.md.</p>
        </div>
      </Frame>
    );
  return (
    <Frame deviceId={deviceId}>
      <Chat models={list} deviceId={deviceId} />
    </Frame>
  );
}

function Frame({ deviceId, children }: { deviceId: string | undefined; children: ComponentChildren }) {
  return (
    <section aria-labelledby="assistant-h" class="assistant">
      <h1 id="assistant-h">Assistant</h1>
      <DevicePicker deviceId={deviceId} />
      {children}
    </section>
  );
}

/** Binding is part of the route (#/assistant/<id>), so "Chat with this device" is a link. */
function DevicePicker({ deviceId }: { deviceId: string | undefined }) {
  const online = useLoad((signal) => api<DeviceList>('GET', '/v1/devices?online=true&limit=100', undefined, { signal }), []);
  const ids = (online.data?.devices ?? []).map((d) => d.id);
  if (deviceId && !ids.includes(deviceId)) ids.unshift(deviceId);
  return (
    <p class="toolbar">
      <label>
        Device{' '}
        <select
          value={deviceId ?? ''}
          onChange={(e) => (location.hash = e.currentTarget.value ? `#/assistant/${encodeURIComponent(e.currentTarget.value)}` : '#/assistant')}
        >
          <option value="">(none: every tool)</option>
          {ids.map((id) => (
            <option key={id} value={id}>
              {id}
            </option>
          ))}
        </select>
      </label>
      {deviceId ? (
        <span class="muted small">
          Bound to <a href={`#/devices/${encodeURIComponent(deviceId)}`}>{deviceId}</a>: its tools come first, under short names.
        </span>
      ) : (
        <span class="muted small">Every online device's tools and the hosted servers' tools.</span>
      )}
    </p>
  );
}

function Chat({ models, deviceId }: { models: AssistantModel[]; deviceId: string | undefined }) {
  const [model, setModel] = useState(() => (models.find((m) => m.default) ?? models[0])?.name ?? '');
  const [entries, setEntries] = useState<Entry[]>([]);
  const [conversationId, setConversationId] = useState<string>();
  const [message, setMessage] = useState('');
  const [running, setRunning] = useState<{ abort: AbortController; turnId?: string }>();
  const [cancelProblem, setCancelProblem] = useState<Problem>();
  const abortRef = useRef<AbortController>();
  const cancelledEarly = useRef<AbortController>();
  // Leaving the page ends the stream: the gateway cancels a turn whose caller went away.
  useEffect(() => () => abortRef.current?.abort(), []);

  const add = (e: Entry) => setEntries((s) => [...s, e].slice(-KEEP));
  const update = (match: (e: Entry) => boolean, f: (e: Entry) => Entry) => setEntries((s) => s.map((e) => (match(e) ? f(e) : e)));

  const onEvent = (ev: TurnEvent, turn: TurnState) => {
    if (ev.type === 'turn.completed' || ev.type === 'turn.failed') turn.ended = true;
    if (ev.type === 'turn.failed' && ev.code === 'CANCELLED') turn.cancelled = true;
    switch (ev.type) {
      case 'turn.started':
        turn.id = ev.turnId;
        setConversationId(ev.conversationId);
        setRunning((r) => r && { ...r, turnId: ev.turnId });
        return;
      case 'text.delta':
        // Text extends the assistant's bubble when it is the newest line; after a tool line it starts a new one.
        return setEntries((s) => {
          const last = s[s.length - 1];
          if (last?.kind === 'assistant') return [...s.slice(0, -1), { ...last, text: last.text + ev.text }];
          return [...s, { kind: 'assistant' as const, id: nextId++, text: ev.text }].slice(-KEEP);
        });
      case 'tool.call':
        return add({ kind: 'tool', id: nextId++, turn: turn.seq, callId: ev.callId, name: ev.name, args: ev.arguments, state: 'running' });
      case 'tool.result':
        return setEntries((s) => {
          const asked = s.find((e): e is Extract<Entry, { kind: 'confirm' }> => e.kind === 'confirm' && e.callId === ev.callId && e.turnId === turn.id);
          const waitedMs = asked?.answeredAt !== undefined ? asked.answeredAt - asked.askedAt : undefined;
          return s.map((e) =>
            e.kind === 'tool' && e.callId === ev.callId && e.turn === turn.seq
              ? { ...e, state: ev.isError ? 'error' : 'ok', durationMs: ev.durationMs, text: ev.text, ...(waitedMs !== undefined ? { waitedMs } : {}) }
              : e,
          );
        });
      case 'confirmation.required':
        return add({ kind: 'confirm', id: nextId++, turnId: turn.id ?? '', callId: ev.callId, name: ev.name, args: ev.arguments, askedAt: performance.now() });
      case 'turn.completed':
        // The final answer is authoritative (e.g. markers stripped); streamed text showed it as it came.
        setConversationId(ev.conversationId);
        return setEntries((s) => {
          const last = s[s.length - 1];
          if (last?.kind === 'assistant') return [...s.slice(0, -1), { ...last, text: ev.text }];
          return ev.text ? [...s, { kind: 'assistant' as const, id: nextId++, text: ev.text }].slice(-KEEP) : s;
        });
      case 'turn.failed':
        return add({
          kind: 'end',
          id: nextId++,
          outcome: ev.code === 'CANCELLED' ? 'cancelled' : 'failed',
          problem: { type: 'about:blank', title: ev.code === 'CANCELLED' ? 'Cancelled' : 'The turn failed', status: 0, code: ev.code, detail: ev.detail },
        });
    }
  };

  const send = async (e: Event) => {
    e.preventDefault();
    const text = message.trim();
    if (!text || running) return;
    const abort = new AbortController();
    abortRef.current = abort;
    setRunning({ abort });
    setCancelProblem(undefined);
    setMessage('');
    add({ kind: 'user', id: nextId++, text });
    const turn: TurnState = { seq: nextTurn++ };
    let outcome: 'cancelled' | 'interrupted' | undefined;
    try {
      await streamTurn({ message: text, conversationId, deviceId, model }, (ev) => onEvent(ev, turn), abort.signal);
      if (!turn.ended) {
        outcome = 'interrupted';
        add({
          kind: 'end',
          id: nextId++,
          outcome: 'failed',
          problem: { type: 'about:blank', title: 'Interrupted', status: 0, code: 'NETWORK', detail: 'the stream ended before the turn finished' },
        });
      }
    } catch (err) {
      outcome = 'interrupted';
      if ((err as Error).name !== 'AbortError') add({ kind: 'end', id: nextId++, outcome: 'failed', problem: problemOf(err) });
      // Cancelled before the gateway named the turn: closing the stream cancels it.
      else if (cancelledEarly.current === abort) {
        outcome = 'cancelled';
        add({ kind: 'end', id: nextId++, outcome: 'cancelled', problem: CANCELLED });
      }
    } finally {
      // A tool still "running" when the turn is over never reported: cancelled with the turn, or cut off with the stream.
      const ended = outcome ?? (turn.cancelled ? 'cancelled' : 'interrupted');
      update(
        (e) => e.kind === 'tool' && e.turn === turn.seq && e.state === 'running',
        (e) => ({ ...e, state: ended }) as Entry,
      );
      if (abortRef.current === abort) abortRef.current = undefined;
      setRunning(undefined);
      // A question left open when the turn ended can no longer be answered (the gateway took it as a no).
      update(
        (e) => e.kind === 'confirm' && e.answer === undefined && e.turnId === turn.id,
        (e) => ({ ...e, answer: 'unanswered' }) as Entry,
      );
    }
  };

  const cancel = async () => {
    if (!running) return;
    if (!running.turnId) {
      cancelledEarly.current = running.abort;
      return running.abort.abort();
    }
    try {
      // The stream then ends with turn.failed CANCELLED.
      await api('DELETE', `/v1/assistant/turns/${encodeURIComponent(running.turnId)}`);
    } catch (err) {
      setCancelProblem(problemOf(err));
      running.abort.abort();
    }
  };

  const answer = async (c: Extract<Entry, { kind: 'confirm' }>, approve: boolean) => {
    const answeredAt = performance.now();
    update(
      (e) => e.id === c.id,
      (e) => ({ ...e, answeredAt }) as Entry,
    );
    try {
      await api('POST', `/v1/assistant/turns/${encodeURIComponent(c.turnId)}/confirmations/${encodeURIComponent(c.callId)}`, { approve });
      update(
        (e) => e.id === c.id,
        (e) => ({ ...e, answer: approve ? 'approved' : 'denied' }) as Entry,
      );
    } catch (err) {
      const problem = problemOf(err);
      // Not recorded: the question is still open, so its wait is not over.
      update(
        (e) => e.id === c.id,
        (e) => ({ ...e, problem, answeredAt: undefined }) as Entry,
      );
    }
  };

  const newConversation = () => {
    if (running) return;
    setEntries([]);
    setConversationId(undefined);
    // Forget it on the gateway too; it would expire anyway.
    if (conversationId) void api('DELETE', `/v1/assistant/conversations/${encodeURIComponent(conversationId)}`).catch(() => undefined);
  };

  return (
    <>
      <div class="toolbar">
        <label>
          Model{' '}
          <select value={model} onChange={(e) => setModel(e.currentTarget.value)}>
            {models.map((m) => (
              <option key={m.name} value={m.name}>
                {m.name} ({m.provider}
                {m.toolMode === 'native' ? '' : `, ${m.toolMode}`})
              </option>
            ))}
          </select>
        </label>
        <button type="button" class="secondary" onClick={newConversation} disabled={!!running || entries.length === 0}>
          New conversation
        </button>
      </div>
      <ol class="transcript" role="log" aria-live="polite" aria-label="Conversation">
        {entries.length === 0 && <li class="muted">Ask something: "what devices are online?", "set the volume to 30".</li>}
        {entries.map((e) => (
          <EntryView key={e.id} entry={e} onAnswer={answer} />
        ))}
      </ol>
      <form class="composer" onSubmit={send}>
        <label for="chat-message" class="sr-only">
          Message
        </label>
        <textarea
          id="chat-message"
          rows={2}
          value={message}
          maxLength={32_768}
          placeholder="Message the assistant (Enter sends, Shift+Enter for a new line)"
          onInput={(e) => setMessage(e.currentTarget.value)}
          onKeyDown={(e) => {
            if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
              e.preventDefault();
              (e.currentTarget.form as HTMLFormElement).requestSubmit();
            }
          }}
        />
        <div class="actions">
          <button type="submit" disabled={!!running || message.trim() === ''}>
            {running ? 'Working…' : 'Send'}
          </button>
          {running && (
            <button type="button" class="secondary" onClick={() => void cancel()}>
              Cancel
            </button>
          )}
        </div>
      </form>
      {cancelProblem && <ProblemBox problem={cancelProblem} label="Cancel failed" />}
    </>
  );
}

function EntryView({ entry: e, onAnswer }: { entry: Entry; onAnswer: (c: Extract<Entry, { kind: 'confirm' }>, approve: boolean) => Promise<void> }) {
  switch (e.kind) {
    case 'user':
      return (
        <li class="msg user">
          <span class="sr-only">You: </span>
          {e.text}
        </li>
      );
    case 'assistant':
      return (
        <li class="msg assistant" data-testid="assistant-text">
          <span class="sr-only">Assistant: </span>
          {e.text}
        </li>
      );
    case 'tool':
      return (
        <li class={`tool-line ${e.state}`} data-tool-call={e.name} data-state={e.state}>
          {e.state === 'running' ? 'Calling tool ' : 'Tool '}
          <code>{e.name}</code>
          <ToolOutcome entry={e} />
          {Object.keys(e.args).length > 0 && <code class="args"> {JSON.stringify(e.args).slice(0, 200)}</code>}
          {e.text !== undefined && (
            <details>
              <summary>result</summary>
              <pre>{e.text}</pre>
            </details>
          )}
        </li>
      );
    case 'confirm':
      return (
        <li class="confirm card" data-confirm={e.name}>
          <p>
            The assistant wants to run <code>{e.name}</code> with <code>{JSON.stringify(e.args).slice(0, 500)}</code>.
          </p>
          {e.answer ? (
            <p>
              {e.answer === 'approved' ? (
                <Badge tone="ok">approved</Badge>
              ) : e.answer === 'denied' ? (
                <Badge tone="off">denied</Badge>
              ) : (
                <Badge tone="warn">not answered: declined</Badge>
              )}
            </p>
          ) : (
            <div class="actions">
              <button type="button" onClick={() => void onAnswer(e, true)} aria-label={`Approve ${e.name}`}>
                Approve
              </button>
              <button type="button" class="secondary" onClick={() => void onAnswer(e, false)} aria-label={`Deny ${e.name}`}>
                Deny
              </button>
            </div>
          )}
          {e.problem && <ProblemBox problem={e.problem} label="Not recorded" />}
        </li>
      );
    case 'end':
      return (
        <li class={`end ${e.outcome}`} data-outcome={e.outcome}>
          {e.outcome === 'cancelled' ? <Badge tone="off">cancelled</Badge> : <ProblemBox problem={e.problem} label="The turn failed" />}
        </li>
      );
  }
}

/**
 * "completed in N ms". The gateway's time runs from the call to its result, so for a tool that waited for a
 * person's yes it includes the wait: that wait (measured here, from the question shown to the answer sent)
 * is taken out and said separately.
 */
function ToolOutcome({ entry: e }: { entry: Extract<Entry, { kind: 'tool' }> }) {
  if (e.state === 'running') return <>…</>;
  if (e.state === 'cancelled') return <> not finished: the turn was cancelled</>;
  if (e.state === 'interrupted') return <> not finished: the turn ended first</>;
  const total = Math.round(e.durationMs ?? 0);
  const ran = e.waitedMs !== undefined ? Math.max(0, Math.round(total - e.waitedMs)) : total;
  const verb = e.state === 'ok' ? 'completed in' : 'failed after';
  return (
    <>
      {' '}
      {verb} <span class="duration">{e.waitedMs !== undefined ? `≈${ran}` : ran} ms</span>
      {e.waitedMs !== undefined && <span class="muted small waited"> (after {(e.waitedMs / 1000).toFixed(1)} s waiting for your answer, not counted)</span>}
    </>
  );
}

/** For the device page: a link that opens the assistant bound to this device. */
export function chatLink(deviceId: string): string {
  return `#/assistant/${encodeURIComponent(deviceId)}`;
}
