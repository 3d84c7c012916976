/**
 * What a model's reply may be, whatever the server at the other end sends (a compromised or misconfigured
 * OpenAI-, Anthropic- or Gemini-compatible endpoint): its response read to a byte bound, derived from the model's
 * `maxTokens` so that no real answer comes near it. A reply past a bound is refused (the request closed, a
 * MODEL_ERROR for the caller); each fault is reported to `onFault` (counted, logged throttled, by the assistant).
 */
import { limitedFetch, type FetchLike } from '../limited-fetch.js';

/** Why a reply was refused. */
export type ReplyFault = 'too_large';

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
}

/**
 * A real reply of `maxTokens` tokens streams at most a few hundred bytes of framing per token: 1 KiB per token,
 * and never less than 4 MiB, is far above it.
 */
export function replyLimits(maxTokens: number): ReplyLimits {
  return { maxBytes: Math.max(4 * 1024 * 1024, maxTokens * 1024) };
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
