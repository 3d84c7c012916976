import { randomUUID } from 'node:crypto';
import { normalizeDeviceId } from '@voxgate/protocol';
import type { Logger } from 'pino';
import { GatewayError } from '../errors.js';
import type { Tokens } from '../hub/credentials.js';
import type { Caller, McpHub } from '../hub/hub.js';
import type { Metrics } from '../metrics.js';
import type { ModelGates } from '../throttle/model-gates.js';
import { REFUSAL_LINES, ThrottledLog } from '../throttle/throttled-log.js';
import { bmpToPng } from '../vision/bmp-to-png.js';
import { imageType } from '../vision/image-type.js';
import { isOwner, ownerOf, shareOf } from '../principal.js';
import { ConversationStore, type Conversation } from './conversations.js';
import { createAssistantMetrics, type AssistantMetrics } from './metrics.js';
import { createProvider } from './providers/index.js';
import { buildToolset } from './toolset.js';
import { modelLabel, resultText, Turn } from './turn.js';
import { TurnCancelled, TurnTimedOut, type TurnEvent, type TurnModel, type TurnResult } from './turn-types.js';
import type { ChatMessage, ImageInput } from './types.js';

import type { AssistantConfig } from './config.js';
export type { AssistantConfig };

export interface ChatRequest {
  message?: string | undefined;
  conversationId?: string | undefined;
  deviceId?: string | undefined;
  model?: string | undefined;
  prompt?: { name: string; arguments?: Record<string, string> | undefined } | undefined;
  resources?: string[] | undefined;
  tokens?: Tokens | undefined;
  /** Earlier messages given by the caller (the OpenAI-compatible endpoint is stateless), before the stored ones. */
  history?: Array<{ role: 'user' | 'assistant'; content: string }> | undefined;
  /** Instructions from the caller, after the gateway's system prompt. */
  system?: string[] | undefined;
}

export interface StartedTurn {
  turn: Turn;
  /** Resolves with the answer; rejects with a GatewayError (model failures) or TurnCancelled. */
  done: Promise<TurnResult>;
}

/**
 * The assistant: named models, conversations, and the turns running now (so a person can confirm a tool
 * or cancel a turn from another request). Everything is per tenant.
 */
export class Assistant {
  private readonly models = new Map<string, TurnModel>();
  readonly conversations: ConversationStore;
  private readonly turns = new Map<string, Turn>();
  private readonly metrics: AssistantMetrics;
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly d: {
      config: AssistantConfig;
      hub: McpHub;
      log: Logger;
      metrics: Metrics;
      env?: NodeJS.ProcessEnv;
      /** The gateway-wide bound on model requests (modelRequests.llm): every turn's model requests take a slot. */
      gates?: Pick<ModelGates, 'llm'> | undefined;
    },
  ) {
    const env = d.env ?? process.env;
    this.metrics = createAssistantMetrics(d.metrics.registry);
    // A model endpoint out of bounds answers every request so: at most 10 lines per reason per 10 s, every one counted.
    const faults = new ThrottledLog(d.log, 'warn', REFUSAL_LINES);
    for (const [name, m] of Object.entries(d.config.models)) {
      const apiKey = m.apiKeyEnv ? env[m.apiKeyEnv] : undefined;
      if (m.apiKeyEnv && !apiKey) d.log.warn({ model: name, apiKeyEnv: m.apiKeyEnv }, 'assistant model: the API key variable is not set');
      // The SDK's own timeout is a backstop: the turn's timer fires first and says MODEL_TIMEOUT.
      const onFault = (reason: string, detail: string) => {
        this.metrics.replyFaults.inc({ provider: m.provider, reason });
        faults.write({ model: name, reason, detail }, 'assistant model reply out of bounds', reason);
      };
      const client = createProvider(
        m.provider,
        { model: m.model, baseUrl: m.baseUrl, apiKey, maxTokens: m.maxTokens, maxRetries: m.maxRetries, timeoutMs: d.config.modelTimeoutMs + 5000 },
        onFault,
      );
      this.models.set(name, { name, provider: m.provider, client, toolMode: m.toolMode, secret: apiKey, endpoint: providerEndpoint(m.baseUrl) });
    }
    this.conversations = new ConversationStore({
      ttlMs: d.config.conversationTtlMs,
      maxConversations: d.config.maxConversations,
      maxTurns: d.config.maxConversationTurns,
      maxBytes: d.config.maxConversationBytes,
      maxTotalBytes: d.config.maxStoredConversationBytes,
    });
    this.sweeper = setInterval(() => this.conversations.sweep(), Math.min(60_000, d.config.conversationTtlMs)).unref();
  }

  modelList(): Array<{ name: string; provider: string; toolMode: string; default: boolean }> {
    const def = this.defaultModel();
    return [...this.models.values()].map((m) => ({ name: m.name, provider: m.provider, toolMode: m.toolMode, default: m.name === def }));
  }

  private defaultModel(): string | undefined {
    return this.d.config.defaultModel ?? this.models.keys().next().value;
  }

  model(name: string | undefined): TurnModel {
    const n = name ?? this.defaultModel();
    const m = n === undefined ? undefined : this.models.get(n);
    if (!m)
      throw new GatewayError(
        'MODEL_NOT_FOUND',
        n === undefined ? 'no assistant model is configured (assistant.models)' : `no assistant model named "${n.slice(0, 64)}"`,
        { models: [...this.models.keys()] },
      );
    return m;
  }

  /** Check everything a turn needs (model, conversation, device, resources, prompt), then start it. Errors here are the caller's (problem+json). */
  // eslint-disable-next-line max-lines-per-function -- the checks a turn needs, in the order their errors must come (model, conversation, device, resources, prompt)
  async start(
    req: ChatRequest,
    caller: Caller,
    o: { stream: boolean; interactive: boolean; asksOneAtATime?: boolean; emit(e: TurnEvent): void },
  ): Promise<StartedTurn> {
    const model = this.model(req.model);
    if (this.turns.size >= this.d.config.maxConcurrentTurns)
      throw new GatewayError('TOO_MANY_TURNS', `${this.turns.size} assistant turns are running; try again shortly`);
    const share = shareOf(caller);
    const mine = [...this.turns.values()].filter((t) => t.share === share).length;
    if (mine >= this.d.config.maxConcurrentTurnsPerTenant)
      throw new GatewayError('TOO_MANY_TURNS', `${mine} assistant turns of yours are running; wait for one to end`);
    const deviceId = req.deviceId === undefined ? undefined : normalizeDeviceId(req.deviceId);
    if (req.deviceId !== undefined && !deviceId) throw new GatewayError('INVALID_REQUEST', 'deviceId must be a MAC address');
    let conv: Conversation | undefined;
    if (req.conversationId !== undefined) {
      conv = this.conversation(req.conversationId, caller);
      if (!conv) throw new GatewayError('NOT_FOUND', 'no such conversation (it may have expired)');
      if (conv.busy) throw new GatewayError('CONVERSATION_BUSY', 'a turn is already running in this conversation');
    }
    const ctx = { ...caller, tokens: req.tokens };
    const scope = this.d.config.tools;
    const toolset = buildToolset(this.d.hub.tools(caller), scope, deviceId);
    const system = [this.d.config.systemPrompt];
    if (deviceId)
      system.push(
        `You are speaking through the device ${deviceId}. Its own tools come first in the list, under short names${toolset.specs.length && [...toolset.byName.values()].some((t) => t.source.kind === 'device' && t.source.deviceId === deviceId) ? '' : ' (it is offline now: it has none)'}.`,
      );
    if (scope === 'all') for (const s of this.d.hub.instructions(caller).system) system.push(s.instruction);
    for (const extra of req.system ?? []) system.push(extra);
    const early: TurnEvent[] = [];
    for (const uri of req.resources ?? []) {
      const r = await this.d.hub.readResource(uri, undefined, ctx);
      const text = r.contents.map((c) => ('text' in c ? String(c.text) : `[${c.mimeType ?? 'binary'} content omitted]`)).join('\n');
      system.push(`Resource ${uri}:\n${text.slice(0, this.d.config.maxToolResultChars)}`);
      early.push({ type: 'resource.read', uri, server: r.server });
    }
    const messages: ChatMessage[] = [];
    for (const m of [...(req.history ?? []), ...(conv?.messages ?? [])]) messages.push({ role: m.role, content: m.content });
    let userText = req.message ?? '';
    if (req.prompt) {
      const p = await this.d.hub.getPrompt(req.prompt.name, req.prompt.arguments ?? {}, ctx);
      early.push({ type: 'prompt.used', name: req.prompt.name, server: p.server });
      for (const m of p.messages) {
        const text =
          m.content.type === 'text'
            ? m.content.text
            : m.content.type === 'resource' && 'text' in m.content.resource
              ? String(m.content.resource.text)
              : resultText({ content: [m.content] });
        messages.push({ role: m.role, content: text });
      }
      // Without a message of its own, the conversation keeps what the template asked.
      if (!userText) userText = [...messages].reverse().find((m) => m.role === 'user')?.content ?? `/prompt ${req.prompt.name}`;
    }
    if (req.message) messages.push({ role: 'user', content: req.message });
    if (!messages.length || messages[messages.length - 1]!.role !== 'user')
      throw new GatewayError('INVALID_REQUEST', 'a turn needs a message (or a prompt that ends with one)');

    conv ??= this.conversations.create(ownerOf(caller));
    conv.busy = true;
    const turnId = randomUUID();
    const log = this.d.log.child({ component: 'assistant', turnId, conversationId: conv.id, model: model.name });
    const turn = new Turn(
      {
        turnId,
        conversationId: conv.id,
        caller,
        tokens: req.tokens,
        model,
        toolset,
        system,
        messages,
        query: req.message ?? '',
        interactive: o.interactive,
        asksOneAtATime: o.asksOneAtATime,
        stream: o.stream,
        emit: o.emit,
      },
      { hub: this.d.hub, log, metrics: this.metrics, settings: this.d.config, gate: this.d.gates?.llm },
    );
    this.turns.set(turnId, turn);
    o.emit({ type: 'turn.started', turnId, conversationId: conv.id, model: model.name });
    for (const e of early) o.emit(e);
    const started = performance.now();
    const c = conv;
    const done = turn.run().then(
      (r) => {
        // The caller has the answer whole; the conversation keeps what fits its bound (conversations.ts fitExchange).
        if (this.conversations.append(c, userText, r.text))
          log.info({ maxConversationBytes: this.d.config.maxConversationBytes }, 'assistant exchange larger than a conversation holds: stored cut');
        this.finish(turn, c, 'completed');
        log.info({ rounds: r.rounds, toolCalls: r.toolCalls.length, usage: r.usage, ms: Math.round(performance.now() - started) }, 'assistant turn completed');
        log.debug({ message: userText, answer: r.text }, 'assistant turn text');
        return r;
      },
      (e: unknown) => {
        const outcome = e instanceof TurnCancelled ? 'cancelled' : e instanceof TurnTimedOut ? 'timeout' : 'failed';
        this.finish(turn, c, outcome);
        if (e instanceof TurnCancelled) log.info({ reason: e.reason }, 'assistant turn cancelled');
        else if (e instanceof TurnTimedOut)
          log.warn({ turnTimeoutMs: e.timeoutMs, ms: Math.round(performance.now() - started) }, 'assistant turn ran past assistant.turnTimeoutMs; stopped');
        // Refused by modelRequests.llm: counted and logged (throttled) by the gate; a line per turn would flood.
        else if (e instanceof GatewayError && e.code === 'MODEL_BUSY') log.debug({ code: e.code, detail: e.message }, 'assistant turn refused');
        else if (e instanceof GatewayError) log.warn({ code: e.code, detail: e.message }, 'assistant turn failed');
        else log.error({ err: e }, 'assistant turn failed');
        throw e instanceof TurnCancelled || e instanceof GatewayError ? e : new GatewayError('INTERNAL', 'the turn failed; see the gateway log');
      },
    );
    return { turn, done };
  }

  private finish(turn: Turn, c: Conversation, outcome: 'completed' | 'failed' | 'cancelled' | 'timeout'): void {
    this.turns.delete(turn.id);
    c.busy = false;
    this.conversations.touch(c);
    this.metrics.turns.inc({ outcome });
  }

  /** The model that answers photo questions: `assistant.visionModel`, else the first with `vision: true`. */
  visionModelName(): string | undefined {
    return this.d.config.visionModel ?? Object.entries(this.d.config.models).find(([, m]) => m.vision)?.[0];
  }

  /**
   * The vision endpoint's question about a device's photo, answered by the vision model in the xiaozhi
   * shape `{success, action: "RESPONSE", response}` (the device speaks `response` as it is). `maxBytes` is
   * the endpoint's own limit, `vision.maxPhotoBytes`: a photo the endpoint took is one the model is shown.
   */
  async explainImage(question: string, photo: Buffer, maxBytes: number): Promise<{ success: true; action: 'RESPONSE'; response: string }> {
    const name = this.visionModelName();
    if (name === undefined) throw new GatewayError('MODEL_NOT_FOUND', 'no vision model is configured (assistant.visionModel, or a model with vision: true)');
    const model = this.model(name);
    if (photo.length > maxBytes) throw new GatewayError('PAYLOAD_TOO_LARGE', `the image is over ${maxBytes} bytes (vision.maxPhotoBytes)`);
    const { mimeType, image } = forModel(photo);
    const started = performance.now();
    const signal = AbortSignal.timeout(this.d.config.modelTimeoutMs);
    let outcome = 'ok';
    try {
      const reply = await model.client.complete({
        system: this.d.config.visionPrompt,
        messages: [
          {
            role: 'user',
            content: question.slice(0, this.d.config.maxMessageBytes) || 'What is in this photo?',
            images: [{ mimeType, data: image.toString('base64') }],
          },
        ],
        tools: [],
        toolChoice: 'auto',
        signal,
      });
      this.metrics.tokens.inc({ provider: model.provider, direction: 'input' }, reply.usage.inputTokens);
      this.metrics.tokens.inc({ provider: model.provider, direction: 'output' }, reply.usage.outputTokens);
      return { success: true, action: 'RESPONSE', response: reply.text };
    } catch (e) {
      outcome = signal.aborted ? 'timeout' : 'error';
      if (outcome === 'timeout') throw new GatewayError('MODEL_TIMEOUT', `model "${name}" did not answer within ${this.d.config.modelTimeoutMs} ms`);
      const msg = (e instanceof Error ? e.message : String(e)).slice(0, 500);
      throw new GatewayError('MODEL_ERROR', `${modelLabel(model)} failed: ${model.secret ? msg.split(model.secret).join('[REDACTED]') : msg}`);
    } finally {
      this.metrics.modelLatency.observe({ provider: model.provider, outcome }, (performance.now() - started) / 1000);
    }
  }

  /** A running turn this caller started, or NOT_FOUND (anyone else's turn is not found either; principal.ts). */
  turn(id: string, caller: Caller): Turn {
    const t = this.turns.get(id);
    if (!t || !isOwner(t.owner, caller)) throw new GatewayError('NOT_FOUND', 'no running turn with this id');
    return t;
  }

  /** A conversation this caller started; undefined for anyone else's (principal.ts). */
  conversation(id: string, caller: Caller): Conversation | undefined {
    const owner = ownerOf(caller);
    return owner === undefined ? undefined : this.conversations.get(id, owner);
  }

  /** Forget a conversation this caller started; false when there is none. */
  forget(id: string, caller: Caller): boolean {
    return this.conversation(id, caller) !== undefined && this.conversations.delete(id, ownerOf(caller));
  }

  /** Cancel every running turn (shutdown). */
  close(): void {
    clearInterval(this.sweeper);
    for (const t of this.turns.values()) t.cancel('the gateway is shutting down');
  }
}

/** The photo in a format every provider reads: BMP (which none takes) becomes PNG; the rest pass as they are. */
function forModel(photo: Buffer): { mimeType: ImageInput['mimeType']; image: Buffer } {
  const type = imageType(photo);
  if (!type) throw new GatewayError('INVALID_REQUEST', 'the image is not a JPEG, PNG, GIF, WebP or BMP');
  if (type !== 'image/bmp') return { mimeType: type, image: photo };
  try {
    return { mimeType: 'image/png', image: bmpToPng(photo) };
  } catch (e) {
    throw new GatewayError('INVALID_REQUEST', e instanceof Error ? e.message : String(e));
  }
}

/** A provider's base URL as errors may show it: no credentials, no query (a key may ride there). */
export function providerEndpoint(baseUrl: string | undefined): string | undefined {
  const u = baseUrl ? URL.parse(baseUrl) : null;
  return u ? `${u.protocol}//${u.host}${u.pathname.replace(/\/+$/, '')}` : undefined;
}
