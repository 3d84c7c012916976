import type { CallToolResult } from '@modelcontextprotocol/client';
import type { Logger } from 'pino';
import { GatewayError } from '../errors.js';
import type { HubTool, McpHub } from '../hub/hub.js';
import { ownerOf, shareOf } from '../principal.js';
import type { ModelGate } from '../throttle/model-gates.js';
import { MarkerModel } from './markers.js';
import type { AssistantMetrics } from './metrics.js';
import { autoContextArgument, callNeedsConfirmation } from './toolset.js';
import { TurnCancelled, TurnTimedOut, type ToolCallRecord, type TurnInput, type TurnModel, type TurnResult, type TurnSettings } from './turn-types.js';
import { addUsage, type ModelProvider, type ModelReply, type ModelRequest, type ToolCallRequest, type Usage } from './types.js';

/** How far past assistant.toolTimeoutMs a tool's own call limit is set (see runTool). */
const TOOL_TIMEOUT_MARGIN_MS = 250;

export const ROUND_LIMIT_MESSAGE = (n: number) =>
  `The limit of ${n} tool rounds for this answer has been reached: no more tools can be run. Answer the user now with what you have, and say what could not be done.`;

/**
 * One turn of the tool loop (seed 000): ask the model with the tools; while it asks for tools, run them
 * (in parallel; each with a timeout; every failure a result the model reads) and ask again; past
 * `maxToolRounds` ask once more with tools disabled. Intermediate steps live only here.
 */
export class Turn {
  private readonly ac = new AbortController();
  /** Pending confirmations, in the order they were asked for; `open` once its window runs. */
  private readonly confirmations = new Map<string, { answer(approve: boolean): void; asked(): void; readonly open: boolean }>();
  private readonly responseInstructions = new Map<string, string>();
  private readonly contextSections: string[] = [];
  private readonly records: ToolCallRecord[] = [];
  private usage: Usage = { inputTokens: 0, outputTokens: 0 };
  private seq = 0;
  private readonly model: ModelProvider;

  constructor(
    private readonly i: TurnInput,
    /** Of the hub, a turn needs only where a call lands and the call itself (a test gives a small stand-in). */
    private readonly d: {
      hub: Pick<McpHub, 'callTarget' | 'call'>;
      log: Logger;
      metrics: AssistantMetrics;
      settings: TurnSettings;
      /** The gateway-wide bound on model requests (modelRequests.llm); absent: none. */
      gate?: Pick<ModelGate, 'acquire'> | undefined;
    },
  ) {
    this.model = i.model.toolMode === 'markers' ? new MarkerModel(i.model.client) : i.model.client;
  }

  get id(): string {
    return this.i.turnId;
  }
  /** Whose share of `maxConcurrentTurnsPerTenant` it counts against (principal.ts shareOf). */
  get share(): string | undefined {
    return shareOf(this.i.caller);
  }
  /** Who may answer its confirmations and cancel it (principal.ts). */
  get owner(): string | undefined {
    return ownerOf(this.i.caller);
  }

  /** Abort the model request and every tool call in flight. */
  cancel(reason: string): void {
    if (!this.ac.signal.aborted) this.ac.abort(new TurnCancelled(reason));
  }

  /** Why the turn stopped: cancelled, or past its deadline. */
  private stopReason(): TurnCancelled | TurnTimedOut {
    const r: unknown = this.ac.signal.reason;
    return r instanceof TurnCancelled || r instanceof TurnTimedOut ? r : new TurnCancelled('aborted');
  }

  /** A person's answer to a pending confirmation; false when there is none with this id. */
  confirm(callId: string, approve: boolean): boolean {
    const c = this.confirmations.get(callId);
    if (!c) return false;
    c.answer(approve);
    return true;
  }

  /**
   * The question of a pending confirmation has been put to the person (a caller that asks one at a time,
   * `asksOneAtATime`): its window, assistant.confirmTimeoutMs, starts now; once started it runs on. False when none is
   * pending with this id.
   */
  asked(callId: string): boolean {
    const c = this.confirmations.get(callId);
    if (!c) return false;
    c.asked();
    return true;
  }

  /**
   * The tool loop within assistant.turnTimeoutMs: at the deadline the turn's signal aborts the model request in
   * flight and every tool call still running (their results never reach the model), and run() rejects TurnTimedOut.
   */
  async run(): Promise<TurnResult> {
    const ms = this.d.settings.turnTimeoutMs;
    const deadline = setTimeout(() => {
      if (!this.ac.signal.aborted) this.ac.abort(new TurnTimedOut(ms));
    }, ms);
    try {
      return await this.loop();
    } finally {
      clearTimeout(deadline);
    }
  }

  private async loop(): Promise<TurnResult> {
    const { i } = this;
    const tools = i.model.toolMode === 'none' ? [] : i.toolset.specs;
    const messages = [...i.messages];
    await this.autoContext();
    let round = 0;
    for (;;) {
      round++;
      const forced = round > this.d.settings.maxToolRounds && tools.length > 0;
      if (forced) messages.push({ role: 'user', content: ROUND_LIMIT_MESSAGE(this.d.settings.maxToolRounds) });
      const reply = await this.ask({ system: this.system(), messages, tools, toolChoice: forced ? 'none' : 'auto' }, round);
      if (!reply.toolCalls.length || forced || !tools.length) {
        const text = reply.text || (forced ? `I stopped after ${this.d.settings.maxToolRounds} rounds of tool calls without an answer.` : '');
        this.d.metrics.rounds.observe(round);
        return { conversationId: i.conversationId, turnId: i.turnId, text, toolCalls: this.records, rounds: round, usage: this.usage };
      }
      messages.push({ role: 'assistant', content: reply.text, toolCalls: reply.toolCalls });
      i.emit({ type: 'tool.calls', round, count: reply.toolCalls.length });
      const cap = this.d.settings.maxToolCallsPerRound;
      // The model chooses its call ids (and injected text can steer it into repeating one): everything the
      // gateway keys on a call (events, records, a person's confirmation) uses an id of its own instead.
      // The model's id goes back to the provider with the result.
      const calls = reply.toolCalls.map((c, k) => ({ ...c, id: `call_${round}_${k + 1}` }));
      const results = await Promise.all(
        calls.map((c, k) => (k < cap ? this.runTool(c, round) : this.refuse(c, round, `Error: not run: at most ${cap} tool calls are run from one reply.`))),
      );
      reply.toolCalls.forEach((c, k) =>
        messages.push({ role: 'tool', toolCallId: c.id, name: c.name, content: results[k]!.text, isError: results[k]!.isError }),
      );
    }
  }

  /** The base prompt and system instructions, auto-context results, then the response instructions of servers whose tools ran. */
  private system(): string {
    return [...this.i.system, ...this.contextSections, ...this.responseInstructions.values()].filter(Boolean).join('\n\n');
  }

  private noteResponseInstruction(t: HubTool | undefined): void {
    if (!t?.responseInstruction || t.source.kind !== 'server') return;
    if (!this.responseInstructions.has(t.source.server)) this.responseInstructions.set(t.source.server, t.responseInstruction);
  }

  /** Before the first model call: each auto-context tool gets the user's message; its result (and its server's response instruction) joins the context. */
  private async autoContext(): Promise<void> {
    const auto = [...this.i.toolset.byName.entries()].filter(([, t]) => t.autoContext);
    // In parallel, but added in list order: the same tools always give the same prompt.
    const results = await Promise.all(
      auto.map(async ([name, t]) => {
        const arg = autoContextArgument(t.inputSchema);
        if (!arg || !this.i.query) {
          this.d.log.info({ turnId: this.i.turnId, tool: name }, 'auto-context tool skipped: no string parameter to put the message in');
          return undefined;
        }
        const r = await this.runTool({ id: this.nextId(), name, arguments: { [arg]: this.i.query } }, 0);
        return r.isError ? undefined : { name, t, text: r.text };
      }),
    );
    for (const r of results) {
      if (!r) continue;
      this.contextSections.push(`Context from ${r.name} for the user's message:\n${r.text}`);
      this.noteResponseInstruction(r.t);
    }
  }

  private nextId(): string {
    return `auto_${++this.seq}`;
  }

  private async ask(req: Omit<ModelRequest, 'signal' | 'onText'>, round: number): Promise<ModelReply> {
    this.throwIfCancelled();
    // A slot at the model service first: the wait has its own bound (MODEL_BUSY past it), not the model's timeout;
    // a turn cancelled while it waits leaves the queue at once (TurnCancelled, from the turn's signal).
    const slot = await this.d.gate?.acquire(this.share, this.ac.signal);
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(), this.d.settings.modelTimeoutMs);
    const started = performance.now();
    const provider = this.i.model.provider;
    let outcome = 'ok';
    try {
      const onText = this.i.stream ? (t: string) => this.i.emit({ type: 'text.delta', text: t, round }) : undefined;
      const reply = await this.model.complete({ ...req, signal: AbortSignal.any([this.ac.signal, timeout.signal]), ...(onText ? { onText } : {}) });
      // The OpenAI SDK ends an aborted stream quietly instead of throwing: a cut-off reply is not an answer.
      if (this.ac.signal.aborted || timeout.signal.aborted) throw new Error('aborted');
      this.usage = addUsage(this.usage, reply.usage);
      this.d.metrics.tokens.inc({ provider, direction: 'input' }, reply.usage.inputTokens);
      this.d.metrics.tokens.inc({ provider, direction: 'output' }, reply.usage.outputTokens);
      return reply;
    } catch (e) {
      if (this.ac.signal.aborted) outcome = this.stopReason() instanceof TurnTimedOut ? 'timeout' : 'cancelled';
      this.throwIfCancelled();
      if (timeout.signal.aborted) {
        outcome = 'timeout';
        throw new GatewayError('MODEL_TIMEOUT', `model "${this.i.model.name}" did not answer within ${this.d.settings.modelTimeoutMs} ms`);
      }
      outcome = 'error';
      throw new GatewayError('MODEL_ERROR', `${modelLabel(this.i.model)} failed: ${this.scrub(e)}`);
    } finally {
      clearTimeout(timer);
      slot?.release();
      this.d.metrics.modelLatency.observe({ provider, outcome }, (performance.now() - started) / 1000);
    }
  }

  private scrub(e: unknown): string {
    let m = (e instanceof Error ? e.message : String(e)).slice(0, 500);
    if (this.i.model.secret) m = m.split(this.i.model.secret).join('[REDACTED]');
    return m;
  }

  private throwIfCancelled(): void {
    if (this.ac.signal.aborted) throw this.stopReason();
  }

  /** Run one tool call; whatever happens short of cancellation becomes a result the model reads. */
  private async runTool(call: ToolCallRequest, round: number): Promise<{ text: string; isError: boolean }> {
    this.throwIfCancelled();
    const started = performance.now();
    // The record's place is taken now, so toolCalls list the calls in the order the model made them.
    const slot = this.records.push({ callId: call.id, name: call.name, arguments: call.arguments, isError: false, durationMs: 0 }) - 1;
    const t = this.i.toolset.byName.get(call.name);
    this.i.emit({ type: 'tool.call', callId: call.id, name: call.name, arguments: call.arguments, round });
    const finish = (text: string, isError: boolean, outcome: string) => {
      const durationMs = Math.round(performance.now() - started);
      const cut =
        text.length > this.d.settings.maxToolResultChars
          ? `${text.slice(0, this.d.settings.maxToolResultChars)}\n[... cut: the result was ${text.length} characters]`
          : text;
      this.records[slot] = { callId: call.id, name: call.name, arguments: call.arguments, isError, durationMs };
      this.d.metrics.toolCalls.inc({ outcome });
      this.i.emit({ type: 'tool.result', callId: call.id, name: call.name, isError, durationMs, text: cut });
      return { text: cut, isError };
    };
    if (!t) return finish(`Error: there is no tool named "${call.name.slice(0, 80)}". Use only the tools listed.`, true, 'not_found');
    if (call.argumentsError) return finish(`Error: ${call.argumentsError}. Call the tool again with a JSON object of arguments.`, true, 'invalid');
    if (round > 0) {
      // Decided on the target as it is now (for device_call, the device tool it names); a call whose target
      // cannot be resolved is not run, so nothing destructive slips through unseen.
      const target = this.d.hub.callTarget(t.name, call.arguments, this.i.caller);
      if (!target) return finish(unreachable(t, call.arguments), true, 'not_found');
      if (callNeedsConfirmation(call.name, t, target, this.d.settings.confirmTools, call.arguments)) {
        const answer = await this.askConfirmation(call);
        if (answer !== 'approved')
          return finish(notConfirmed(call.name, answer, this.d.settings.confirmTimeoutMs), true, answer === 'declined' ? 'declined' : 'unconfirmed');
      }
    }
    const timeoutMs = this.d.settings.toolTimeoutMs;
    const ac = new AbortController();
    const onTurnAbort = () => ac.abort();
    this.ac.signal.addEventListener('abort', onTurnAbort, { once: true });
    let timer: NodeJS.Timeout | undefined;
    try {
      const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
      const cancelled = new Promise<'cancelled'>((resolve) => ac.signal.addEventListener('abort', () => resolve('cancelled'), { once: true }));
      // The turn's own timer decides (one message, one outcome); the call's limit sits just past it, so the
      // device or server timeout never wins the race on a busy machine.
      const call$ = this.d.hub.call(t.name, call.arguments, {
        ...this.i.caller,
        tokens: this.i.tokens,
        timeoutMs: timeoutMs + TOOL_TIMEOUT_MARGIN_MS,
        signal: ac.signal,
      });
      // A device cannot cancel: its late result is dropped (the race is lost), the queue moves on.
      call$.catch(() => undefined);
      const r = await Promise.race([call$, timedOut, cancelled]);
      if (r === 'cancelled') this.throwIfCancelled();
      if (r === 'timeout' || r === 'cancelled') {
        ac.abort();
        return finish(`Error: "${call.name}" did not finish within ${timeoutMs} ms (timed out).`, true, 'timeout');
      }
      const text = resultText(r);
      this.noteResponseInstruction(t);
      return finish(text, Boolean(r.isError), r.isError ? 'error' : 'ok');
    } catch (e) {
      if (e instanceof TurnCancelled || e instanceof TurnTimedOut) throw e;
      this.throwIfCancelled();
      if (e instanceof GatewayError) {
        const offline = e.code === 'TOOL_NOT_FOUND' && t.source.kind === 'device';
        const text = offline
          ? `Error: device ${t.source.kind === 'device' ? t.source.deviceId : ''} is offline or no longer offers this tool.`
          : `Error: ${e.message}`;
        return finish(text, true, e.code === 'INVALID_ARGUMENTS' ? 'invalid' : 'error');
      }
      this.d.log.warn({ turnId: this.i.turnId, tool: call.name, err: (e as Error).message }, 'assistant tool call failed');
      return finish(`Error: the call failed: ${(e as Error).message}`, true, 'error');
    } finally {
      clearTimeout(timer);
      this.ac.signal.removeEventListener('abort', onTurnAbort);
    }
  }

  /** A call that is answered without running. */
  private refuse(call: ToolCallRequest, round: number, text: string): Promise<{ text: string; isError: boolean }> {
    this.i.emit({ type: 'tool.call', callId: call.id, name: call.name, arguments: call.arguments, round });
    this.records.push({ callId: call.id, name: call.name, arguments: call.arguments, isError: true, durationMs: 0 });
    this.d.metrics.toolCalls.inc({ outcome: 'refused' });
    this.i.emit({ type: 'tool.result', callId: call.id, name: call.name, isError: true, durationMs: 0, text });
    return Promise.resolve({ text, isError: true });
  }

  /**
   * For a caller that shows the questions as they come (the HTTP API; `voxgate chat` puts them one after another), the
   * windows of one turn run one after another: the next opens when the one before is answered or closes. All from the
   * call, a later question's window was spent while the one before it was answered, and the answer came too late.
   */
  private openNextWindow(): void {
    if (this.i.asksOneAtATime) return;
    const pending = [...this.confirmations.values()];
    if (!pending.some((c) => c.open)) pending[0]?.asked();
  }

  private async askConfirmation(call: ToolCallRequest): Promise<ConfirmAnswer> {
    const policy = this.d.settings.confirm;
    if (policy === 'allow') return 'approved';
    if (policy === 'deny') return 'policy';
    // Nobody can answer without a stream (plain JSON, /v1/chat/completions, `voxgate chat -m` piped).
    if (!this.i.interactive) return 'nobody';
    const timeoutMs = this.d.settings.confirmTimeoutMs;
    return new Promise<ConfirmAnswer>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const done = (v: ConfirmAnswer) => {
        clearTimeout(timer);
        this.confirmations.delete(call.id);
        this.ac.signal.removeEventListener('abort', onAbort);
        this.openNextWindow();
        resolve(v);
      };
      const onAbort = () => {
        clearTimeout(timer);
        this.confirmations.delete(call.id);
        reject(this.stopReason());
      };
      // The window: from when this question is asked (a caller asking one at a time says when: Turn.asked), else from
      // when the one before it was settled (openNextWindow). Until then it waits within the turn's deadline.
      const open = () => void (timer ??= setTimeout(() => done('timeout'), timeoutMs));
      const answer = (approve: boolean) => done(approve ? 'approved' : 'declined');
      this.confirmations.set(call.id, {
        answer,
        asked: open,
        get open() {
          return timer !== undefined;
        },
      });
      this.ac.signal.addEventListener('abort', onAbort, { once: true });
      this.openNextWindow();
      this.i.emit({ type: 'confirmation.required', callId: call.id, name: call.name, arguments: call.arguments, timeoutMs });
    });
  }
}

/** How a confirmation ended: a person's yes or no, no answer in time, nobody to ask, or `assistant.confirm: deny`. */
type ConfirmAnswer = 'approved' | 'declined' | 'timeout' | 'nobody' | 'policy';

/**
 * What the model reads when a call needing a yes did not get one. Only a person's no is "the person
 * declined": with nobody to ask, the model must not tell the user they refused something never put to them.
 */
function notConfirmed(name: string, answer: Exclude<ConfirmAnswer, 'approved'>, timeoutMs: number): string {
  const again = 'Do not run it again unless they ask for it.';
  switch (answer) {
    case 'declined':
      return `The person declined: "${name}" was not run. ${again}`;
    case 'timeout':
      return `Not run: "${name}" needs the person's confirmation and nobody answered within ${Math.round(timeoutMs / 1000)} s, so it was declined. ${again}`;
    case 'nobody':
      return (
        `Not run: "${name}" needs a person's confirmation, and nobody could give it here (this request has no way to ask), ` +
        'so it was declined without asking anyone. Tell the user it needs their confirmation in an interactive chat (the console or `voxgate chat`).'
      );
    case 'policy':
      return `Not run: "${name}" needs a confirmation, and this gateway declines every such call (assistant.confirm is "deny").`;
  }
}

/** What the model reads when a call's target is gone (a device offline, a tool no longer offered). */
function unreachable(t: HubTool, args: Record<string, unknown>): string {
  if (t.source.kind === 'device') return `Error: device ${t.source.deviceId} is offline or no longer offers this tool.`;
  if (t.source.kind === 'server') return `Error: server "${t.source.server}" no longer offers "${t.source.tool}".`;
  const id = args['device_id'];
  const tool = args['tool'];
  if (typeof id !== 'string' || typeof tool !== 'string') return 'Error: device_call needs {"device_id": string, "tool": string, "arguments": object}.';
  return `Error: device ${id.slice(0, 64)} is offline or has no tool named "${tool.slice(0, 80)}". Call devices_list for the devices and their tools.`;
}

/** A tool result as text the model reads: text parts, structured content when there is no text, placeholders for the rest. */
export function resultText(r: CallToolResult): string {
  const parts: string[] = [];
  for (const c of r.content ?? []) {
    if (c.type === 'text') parts.push(c.text);
    else if (c.type === 'resource' && 'text' in c.resource) parts.push(String(c.resource.text));
    else parts.push(`[${c.type} content omitted]`);
  }
  if (!parts.length && r.structuredContent) parts.push(JSON.stringify(r.structuredContent));
  return parts.join('\n') || (r.isError ? 'Error: the tool failed without a message.' : '(no output)');
}

/** `model "local" (http://127.0.0.1:11434/v1)`: which model, and where it was asked, for the person reading the error. */
export function modelLabel(m: Pick<TurnModel, 'name' | 'endpoint'>): string {
  return m.endpoint ? `model "${m.name}" (${m.endpoint})` : `model "${m.name}"`;
}
