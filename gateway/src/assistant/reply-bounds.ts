/**
 * What a model's reply may be, whatever the server at the other end sends (a compromised or misconfigured
 * OpenAI-, Anthropic- or Gemini-compatible endpoint): its response read to a byte bound, and its text to a length,
 * both derived from the model's `maxTokens` so that no real answer comes near them. A reply past a bound is refused (the request closed, a
 * MODEL_ERROR for the caller); each fault is reported to `onFault` (counted, logged throttled, by the assistant).
 */
import { limitedFetch, type FetchLike } from '../limited-fetch.js';
import type { ModelProvider, ModelReply, ModelRequest } from './types.js';

/**
 * Why a reply was refused; `truncated`: its stream ended before the model said it had finished; `bad_usage`: its token
 * counts were not counts (ignored, the reply kept).
 */
export type ReplyFault = 'too_large' | 'too_long' | 'too_many_tool_calls' | 'truncated' | 'bad_usage';

export class ReplyRefused extends Error {
  constructor(
    readonly reason: ReplyFault,
    message: string,
  ) {
    super(message);
  }
}

export interface ReplyLimits {
  /** Bytes of one response read (streamed or not, SSE framing included). */
  maxBytes: number;
  /** Characters of the reply's text (what the caller gets, and the conversation keeps). */
  maxChars: number;
  /** Tool calls in one reply (assistant.maxToolCallsPerRound, at most 256, of them run; the rest answered "not run"). */
  maxToolCalls: number;
}

/** More tool calls than any real reply asks for at once; the most maxToolCallsPerRound may be. */
const MAX_TOOL_CALLS = 256;

/**
 * A real reply of `maxTokens` tokens streams at most a few hundred bytes of framing per token, and a token is a few
 * characters: 1 KiB and 16 characters per token, and never less than 4 MiB and 64 Ki characters, are far above it.
 */
export function replyLimits(maxTokens: number): ReplyLimits {
  return { maxBytes: Math.max(4 * 1024 * 1024, maxTokens * 1024), maxChars: Math.max(64 * 1024, maxTokens * 16), maxToolCalls: MAX_TOOL_CALLS };
}

/**
 * One request to `inner` within `limits`: streamed text past `maxChars` closes the request at once (the deltas
 * past the bound are not passed on); a reply's text past it, streamed or not, is refused, and so is a reply asking
 * for more than `maxToolCalls` tool calls (none of them run). The thinking a provider reports (onThinking) counts
 * with the text: a real model's thinking and answer share its maxTokens, so together they stay within the bound,
 * while a server's endless thinking, kept whole by the SDK, grew until the byte bound (1 KiB per token) alone.
 */
export async function boundedComplete(inner: ModelProvider, limits: ReplyLimits, req: ModelRequest): Promise<ModelReply> {
  let thinking = 0;
  const tooLong = () => new ReplyRefused('too_long', `the reply was longer than ${limits.maxChars} characters${thinking ? ' (its thinking included)' : ''}`);
  const stop = new AbortController();
  let chars = 0;
  /** Counts `n` more characters; false (and the request closed) once past the bound. */
  const within = (n: number): boolean => {
    if (stop.signal.aborted) return false;
    chars += n;
    if (chars <= limits.maxChars) return true;
    stop.abort(tooLong());
    return false;
  };
  const onText = req.onText;
  const bounded: ModelRequest = { ...req, signal: AbortSignal.any([req.signal, stop.signal]) };
  bounded.onThinking = (delta) => {
    thinking += delta.length;
    within(delta.length);
  };
  if (onText) bounded.onText = (delta) => void (within(delta.length) && onText(delta));
  let reply: ModelReply;
  try {
    reply = await inner.complete(bounded);
  } catch (e) {
    throw stop.signal.aborted ? (stop.signal.reason as ReplyRefused) : e;
  }
  // An SDK may end an aborted stream quietly instead of throwing.
  if (stop.signal.aborted) throw stop.signal.reason as ReplyRefused;
  if (reply.text.length + thinking > limits.maxChars) throw tooLong();
  if (reply.toolCalls.length > limits.maxToolCalls)
    throw new ReplyRefused('too_many_tool_calls', `the reply asked for ${reply.toolCalls.length} tool calls (at most ${limits.maxToolCalls} in one reply)`);
  return reply;
}

/**
 * A streamed reply must end with the model's own word that it finished (OpenAI-compatible: a choice's finish_reason,
 * which OpenAI, Ollama, vLLM, llama.cpp and LM Studio all send; Anthropic: message_stop; Gemini: a finishReason).
 * A stream that just stops was cut, by the server or the connection: the SDKs end it quietly, and what came (half an
 * answer, tool calls whose reply never finished) is not the answer. Not when the request was aborted: that is the
 * caller's (a cancel, a timeout, a bound), and reported as such.
 */
export function checkFinished(finished: boolean, signal: AbortSignal, missing: string): void {
  if (!finished && !signal.aborted) throw new ReplyRefused('truncated', `the reply stream ended before the model finished (${missing})`);
}

/** More tokens than any one request has used: a count past it is not one. */
const MAX_TOKENS_COUNTED = 100_000_000;
const isCount = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= 0 && (n as number) <= MAX_TOKENS_COUNTED;

/**
 * The reply's usage as counts the metrics and the caller can take: a number that is not a whole count of tokens
 * (negative, fractional, huge, not a number) becomes 0, reported once per reply. A negative one made the token
 * counter throw (the turn failed), and a huge one made it infinite for good.
 */
export function saneUsage(reply: ModelReply, onFault: (detail: string) => void): ModelReply {
  const { inputTokens, outputTokens } = reply.usage;
  if (isCount(inputTokens) && isCount(outputTokens)) return reply;
  onFault(`the reply's usage was not token counts: ${String(inputTokens).slice(0, 32)} in, ${String(outputTokens).slice(0, 32)} out`);
  return { ...reply, usage: { inputTokens: isCount(inputTokens) ? inputTokens : 0, outputTokens: isCount(outputTokens) ? outputTokens : 0 } };
}

/** The SDK clients' `fetch`: a response read past `maxBytes` fails with ReplyRefused `too_large`. */
export function replyFetch(limits: ReplyLimits): FetchLike {
  return limitedFetch(limits.maxBytes, () => new ReplyRefused('too_large', `the reply was larger than ${limits.maxBytes} bytes`));
}

/** The ReplyRefused behind an SDK's error (the SDKs wrap what a body's stream failed with), if any. */
export function refusalOf(e: unknown): ReplyRefused | undefined {
  for (let x: unknown = e, depth = 0; x !== undefined && x !== null && depth < 8; depth++) {
    if (x instanceof ReplyRefused) return x;
    x = (x as { cause?: unknown }).cause;
  }
  return undefined;
}
