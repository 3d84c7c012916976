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
  let parsed = tryParseJson(text);
  if (!parsed.ok) {
    const fixed = repairUnescapedErrorMessage(text);
    // The repair only escapes characters, but its output is bounded again rather than reasoned about.
    const second = fixed === undefined || !checkJsonBounds(fixed, limits).ok ? undefined : tryParseJson(fixed);
    if (!second?.ok) return fail('not_json', parsed.error);
    parsed = second;
    repaired = true;
  }
  if (!isJsonObject(parsed.value)) return fail('not_object', 'a frame must be a JSON object');
  const env = DeviceFrameSchema.safeParse(parsed.value);
  if (!env.success) return fail('bad_envelope', describeIssues(env.error.issues));
  if (env.data.type === 'mcp' && !isJsonObject(parsed.value['payload'])) {
    return fail('bad_envelope', 'payload: an mcp frame needs an object payload');
  }
  return ok({ frame: parsed.value as DeviceFrame, repaired });
}

/** The envelope the gateway wraps around every MCP message to a device. */
export function encodeMcpFrame(sessionId: string, payload: unknown): string {
  return JSON.stringify({ session_id: sessionId, type: 'mcp', payload });
}
