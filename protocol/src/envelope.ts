import { z } from 'zod';
import { DEFAULT_JSON_LIMITS, checkJsonBounds, isJsonObject, tryParseJson, type JsonLimits, type JsonObject } from './json.js';
import { repairUnescapedErrorMessage } from './repair.js';
import { describeIssues, fail, ok, type Parsed } from './result.js';

/**
 * Every JSON frame between device and gateway is an object with a `type`; MCP rides inside
 * `{session_id, type:"mcp", payload}`. Other types (`hello`, `listen`, `abort`, `goodbye`...) keep
 * their own members, so the schema passes unknown keys through.
 */
export const DeviceFrameSchema = z
  .object({
    type: z.string().min(1).max(64),
    session_id: z.string().max(256).nullish(),
  })
  .loose();

export type DeviceFrame = z.infer<typeof DeviceFrameSchema> & JsonObject;
export type FrameRejectReason = 'too_deep' | 'too_large' | 'not_json' | 'not_object' | 'bad_envelope';

export interface ParsedFrame {
  frame: DeviceFrame;
  /** The text was not valid JSON and was repaired (an unescaped device error message). */
  repaired: boolean;
}

/**
 * Parse a device text frame. Never throws; a rejected frame says why (a metrics label). Depth and size
 * are checked before anything is parsed, so nothing downstream ever holds a value nested deeper than
 * `limits.maxDepth`.
 */
export function parseDeviceFrame(text: string, limits: JsonLimits = DEFAULT_JSON_LIMITS): Parsed<ParsedFrame, FrameRejectReason> {
  const bounds = checkJsonBounds(text, limits);
  if (!bounds.ok) return fail(bounds.reason, bounds.detail);
  let repaired = false;
  let value: unknown;
  // JSON.parse itself, not tryParseJson: no result object per frame on the usual path.
  try {
    value = JSON.parse(text);
  } catch (e) {
    const fixed = repairUnescapedErrorMessage(text);
    // The repair only escapes characters, but its output is bounded again rather than reasoned about.
    const second = fixed === undefined || !checkJsonBounds(fixed, limits).ok ? undefined : tryParseJson(fixed);
    if (!second?.ok) return fail('not_json', e instanceof Error ? e.message : String(e));
    value = second.value;
    repaired = true;
  }
  if (!isJsonObject(value)) return fail('not_object', 'a frame must be a JSON object');
  if (!envelopeFits(value)) {
    const env = DeviceFrameSchema.safeParse(value);
    if (!env.success) return fail('bad_envelope', describeIssues(env.error.issues));
  }
  if (value['type'] === 'mcp' && !isJsonObject(value['payload'])) {
    return fail('bad_envelope', 'payload: an mcp frame needs an object payload');
  }
  return ok({ frame: value as DeviceFrame, repaired });
}

/**
 * DeviceFrameSchema's own check, in a few comparisons: true for exactly the frames it accepts. Every frame
 * passes here; only one this refuses goes to the schema, for its message (zod per frame was ~1 % of the
 * gateway's CPU per call, profile in docs/performance.md).
 */
export function envelopeFits(v: JsonObject): boolean {
  const type = v['type'];
  if (typeof type !== 'string' || type.length < 1 || type.length > 64) return false;
  const sid = v['session_id'];
  return sid === undefined || sid === null || (typeof sid === 'string' && sid.length <= 256);
}

/** The envelope the gateway wraps around every MCP message to a device. */
export function encodeMcpFrame(sessionId: string, payload: unknown): string {
  return JSON.stringify({ session_id: sessionId, type: 'mcp', payload });
}

const REFERENCE_HEAD = '{"session_id":"';
/** The envelope's own bound on `session_id` (DeviceFrameSchema): a longer one is not a valid frame. */
const MAX_SESSION_ID = 256;

/**
 * What follows the session id in the firmware's (reference) layout of a result reply to request `id`:
 * `{"session_id":"<sid>","type":"mcp","payload":{"jsonrpc":"2.0","id":<id>,"result":<result>}}`.
 */
export function referenceResultTail(id: number): string {
  return `","type":"mcp","payload":{"jsonrpc":"2.0","id":${id},"result":`;
}

/**
 * The result text inside a reference-layout frame (`tail` from `referenceResultTail`), or undefined when
 * the frame has another shape or an envelope the ordinary parser would refuse. The session id may be any
 * valid string without escapes (MQTT devices send their own, often empty): it does not change the result.
 */
export function referenceResultText(frame: string, tail: string): string | undefined {
  if (!frame.startsWith(REFERENCE_HEAD)) return undefined;
  const close = frame.indexOf('"', REFERENCE_HEAD.length);
  if (close < 0 || close - REFERENCE_HEAD.length > MAX_SESSION_ID) return undefined;
  for (let i = REFERENCE_HEAD.length; i < close; i++) {
    const c = frame.charCodeAt(i);
    if (c < 0x20 || c === 0x5c /* \ */) return undefined;
  }
  if (!frame.startsWith(tail, close)) return undefined;
  const start = close + tail.length;
  if (frame.length <= start + 2 || !frame.endsWith('}}')) return undefined;
  return frame.slice(start, -2);
}
