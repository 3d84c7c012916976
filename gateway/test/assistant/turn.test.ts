import type { CallToolResult } from '@modelcontextprotocol/client';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { metricValue, silentLog } from '../../../test/support/device-parts.js';
import { deferred } from '../../../test/support/wait.js';
import { createAssistantMetrics } from '../../src/assistant/metrics.js';
import { buildToolset } from '../../src/assistant/toolset.js';
import { Turn } from '../../src/assistant/turn.js';
import { TurnTimedOut, type TurnEvent, type TurnSettings } from '../../src/assistant/turn-types.js';
import type { ChatMessage, ModelProvider, ModelReply, ModelRequest, ToolCallRequest } from '../../src/assistant/types.js';
import type { HubTool } from '../../src/hub/hub.js';
import type { Metrics } from '../../src/metrics.js';

const LAMP = '02:00:00:00:24:09';
const RESET = `device__${LAMP.replace(/:/g, '')}__self_factory_reset`;
const reset: HubTool = {
  name: RESET,
  description: `[device ${LAMP}] Erase everything`,
  inputSchema: { type: 'object', properties: {} },
  annotations: { destructiveHint: true },
  source: { kind: 'device', deviceId: LAMP, tool: 'self.factory_reset' },
};

const settings: TurnSettings = {
  maxToolRounds: 5,
  maxToolCallsPerRound: 8,
  toolTimeoutMs: 5000,
  modelTimeoutMs: 5000,
  turnTimeoutMs: 60_000,
  confirm: 'ask',
  confirmTools: [],
  confirmTimeoutMs: 1000,
  maxToolResultChars: 10_000,
};

/** A model double: each reply in turn (tool calls or text); the messages it was sent are kept. */
function model(replies: Array<{ text?: string; toolCalls?: Array<Omit<ToolCallRequest, 'id'>> }>): ModelProvider & { seen: ChatMessage[][] } {
  const seen: ChatMessage[][] = [];
  let n = 0;
  return {
    seen,
    complete(req: ModelRequest): Promise<ModelReply> {
      seen.push(structuredClone(req.messages));
      const r = replies[n++] ?? { text: '' };
      const toolCalls = (r.toolCalls ?? []).map((c, k) => ({ ...c, id: `model_${n}_${k}` }));
      return Promise.resolve({ text: r.text ?? '', toolCalls, usage: { inputTokens: 1, outputTokens: 1 } });
    },
  };
}

/** A turn over a fake hub holding `tools`; `ran` records every call that reached it. */
function turnWith(o: {
  interactive: boolean;
  asksOneAtATime?: boolean;
  settings?: Partial<TurnSettings>;
  tools?: HubTool[];
  result?: CallToolResult;
  replies?: Parameters<typeof model>[0];
}) {
  const registry = new Registry();
  const metrics = createAssistantMetrics(registry);
  const tools = o.tools ?? [reset];
  const ran: string[] = [];
  const client = model(o.replies ?? [{ toolCalls: [{ name: RESET, arguments: {} }] }, { text: 'ok' }]);
  const events: TurnEvent[] = [];
  const hub = {
    callTarget: (name: string) => tools.find((t) => t.name === name),
    call: (name: string) => {
      ran.push(name);
      return Promise.resolve({ content: [{ type: 'text' as const, text: 'erased' }], isError: false, durationMs: 1, ...o.result });
    },
  };
  const turn = new Turn(
    {
      turnId: 't-1',
      conversationId: 'c-1',
      caller: {},
      model: { name: 'double', provider: 'openai', client, toolMode: 'native' },
      toolset: buildToolset(tools, 'all'),
      system: ['You are a voice assistant.'],
      messages: [{ role: 'user', content: 'reset the lamp' }],
      query: 'reset the lamp',
      interactive: o.interactive,
      asksOneAtATime: o.asksOneAtATime,
      stream: false,
      emit: (e) => {
        events.push(e);
        if (e.type === 'confirmation.required') onAsk?.(e.callId);
      },
    },
    { hub, log: silentLog, metrics, settings: { ...settings, ...o.settings } },
  );
  let onAsk: ((callId: string) => void) | undefined;
  /** What the model was told about the tool call, in its second request. */
  const modelSaw = () => (client.seen[1]!.find((m) => m.role === 'tool') as { content: string }).content;
  const outcome = (name: string) => metricValue({ registry } as unknown as Metrics, 'voxgate_assistant_tool_calls_total', { outcome: name });
  return { turn, ran, events, modelSaw, outcome, answerAsks: (f: (callId: string) => void) => (onAsk = f) };
}

/**
 * What the model is told when a call that needs a yes did not get one (issue 24 item 9): only a person's
 * no is "the person declined"; with nobody to ask it must hear that no one could confirm. Moved from e2e.
 */
describe('Turn: the wording of a call that was not confirmed', () => {
  it('nobody to ask: not run, a confirmation nobody could give, not "the person declined"', async () => {
    const t = turnWith({ interactive: false });
    const r = await t.turn.run();
    expect(r.text).toBe('ok');
    expect(t.modelSaw()).toMatch(/^Not run: ".*" needs a person's confirmation, and nobody could give it here/);
    expect(t.modelSaw()).not.toMatch(/The person declined/);
    expect(await t.outcome('unconfirmed')).toBe(1);
    expect(t.ran).toEqual([]);
    expect(r.toolCalls).toMatchObject([{ name: RESET, isError: true }]);
  });

  it('a person who says no: "The person declined"', async () => {
    const t = turnWith({ interactive: true });
    t.answerAsks((callId) => expect(t.turn.confirm(callId, false)).toBe(true));
    await t.turn.run();
    expect(t.modelSaw()).toMatch(/^The person declined: ".*" was not run\./);
    expect(t.events.find((e) => e.type === 'confirmation.required')).toMatchObject({ name: RESET, timeoutMs: 1000 });
    expect(await t.outcome('declined')).toBe(1);
    expect(t.ran).toEqual([]);
  });

  it('nobody answering in time: says so', async () => {
    const t = turnWith({ interactive: true });
    await t.turn.run();
    expect(t.modelSaw()).toMatch(/^Not run: ".*" needs the person's confirmation and nobody answered within 1 s/);
    expect(t.ran).toEqual([]);
  });

  it('a person who says yes: the tool runs and the model reads its result', async () => {
    const t = turnWith({ interactive: true });
    t.answerAsks((callId) => t.turn.confirm(callId, true));
    await t.turn.run();
    expect(t.ran).toEqual([RESET]);
    expect(t.modelSaw()).toBe('erased');
    expect(t.turn.confirm('no-such-call', true)).toBe(false);
  });

  it('confirm: deny refuses without asking; confirm: allow runs without asking', async () => {
    const denied = turnWith({ interactive: true, settings: { confirm: 'deny' } });
    await denied.turn.run();
    expect(denied.events.some((e) => e.type === 'confirmation.required')).toBe(false);
    expect(denied.ran).toEqual([]);
    const allowed = turnWith({ interactive: false, settings: { confirm: 'allow' } });
    await allowed.turn.run();
    expect(allowed.ran).toEqual([RESET]);
  });
});

/**
 * A caller that asks its questions one at a time (a voice device speaks them) starts each window when it asks
 * (Turn.asked): the calls of one reply all wait from the start, so a window counted from the call was spent, for a later
 * question, while the ones before it were asked and answered. The windows here run on the test's clock.
 */
describe('Turn: confirmations asked one at a time', () => {
  afterEach(() => {
    vi.useRealTimers();
  });
  const twoResets = [
    {
      toolCalls: [
        { name: RESET, arguments: {} },
        { name: RESET, arguments: { keep: 'wifi' } },
      ],
    },
    { text: 'ok' },
  ];
  /** The turn, running, once both of its confirmations are pending: their call ids in order. */
  const twoQuestions = async (asksOneAtATime = true) => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const t = turnWith({ interactive: true, asksOneAtATime, replies: twoResets });
    const ids: string[] = [];
    const both = deferred();
    t.answerAsks((id) => {
      ids.push(id);
      if (ids.length === 2) both.resolve();
    });
    const run = t.turn.run();
    run.catch(() => undefined);
    await both.promise;
    return { ...t, run, ids };
  };

  it('each window starts when its question is asked: the second is confirmed after the first took most of its window', async () => {
    const t = await twoQuestions();
    // Not asked yet: no window runs, however long they wait (five windows here).
    await vi.advanceTimersByTimeAsync(5000);
    expect(t.turn.asked(t.ids[0]!)).toBe(true);
    await vi.advanceTimersByTimeAsync(900);
    expect(t.turn.confirm(t.ids[0]!, true)).toBe(true);
    expect(t.turn.asked(t.ids[1]!)).toBe(true);
    // 900 ms into its own window, 6800 ms after its call was made.
    await vi.advanceTimersByTimeAsync(900);
    expect(t.turn.confirm(t.ids[1]!, true)).toBe(true);
    expect((await t.run).text).toBe('ok');
    expect(t.ran).toEqual([RESET, RESET]);
  });

  it('a question asked and not answered closes after its window; one never asked ends with the turn, at its deadline', async () => {
    const t = await twoQuestions();
    t.turn.asked(t.ids[0]!);
    // Asking again does not restart the window.
    await vi.advanceTimersByTimeAsync(600);
    t.turn.asked(t.ids[0]!);
    await vi.advanceTimersByTimeAsync(400);
    expect(t.events.find((e) => e.type === 'tool.result')).toMatchObject({ callId: t.ids[0], isError: true });
    expect(t.turn.confirm(t.ids[0]!, true)).toBe(false);
    expect(await t.outcome('unconfirmed')).toBe(1);
    // The second, never asked, waits within the turn's deadline (assistant.turnTimeoutMs), not past it.
    await vi.advanceTimersByTimeAsync(settings.turnTimeoutMs);
    await expect(t.run).rejects.toBeInstanceOf(TurnTimedOut);
    expect(t.turn.confirm(t.ids[1]!, true)).toBe(false);
    expect(t.ran).toEqual([]);
  });

  it('a caller that does not say when it asks (the HTTP API): the windows run one after another, each from when the one before was settled', async () => {
    const t = await twoQuestions(false);
    // The first window runs from the call; the second has not started while the first is answered, 900 ms in.
    await vi.advanceTimersByTimeAsync(900);
    expect(t.turn.confirm(t.ids[0]!, true)).toBe(true);
    // 1800 ms after both calls were made, 900 ms into the second's own window: still answerable.
    await vi.advanceTimersByTimeAsync(900);
    expect(t.turn.confirm(t.ids[1]!, false)).toBe(true);
    expect((await t.run).text).toBe('ok');
    expect(t.ran).toEqual([RESET]);
  });

  it('without answers, the HTTP windows close one after another: the second a window after the first', async () => {
    const t = await twoQuestions(false);
    await vi.advanceTimersByTimeAsync(1000);
    expect(t.turn.confirm(t.ids[0]!, true)).toBe(false);
    expect(t.events.filter((e) => e.type === 'tool.result').map((e) => e.callId)).toEqual([t.ids[0]]);
    await vi.advanceTimersByTimeAsync(999);
    expect(t.events.filter((e) => e.type === 'tool.result')).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(t.turn.confirm(t.ids[1]!, true)).toBe(false);
    expect((await t.run).text).toBe('ok');
    expect(t.ran).toEqual([]);
    expect(await t.outcome('unconfirmed')).toBe(2);
  });
});
