import { z } from 'zod';
import { isJsonObject, tryParseJson, type JsonObject } from './json.js';
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
export type FrameRejectReason = 'not_json' | 'not_object' | 'bad_envelope';

export interface ParsedFrame {
  frame: DeviceFrame;
  /** The text was not valid JSON and was repaired (an unescaped device error message). */
  repaired: boolean;
}

/** Parse a device text frame. Never throws; a rejected frame says why (a metrics label). */
export function parseDeviceFrame(text: string): Parsed<ParsedFrame, FrameRejectReason> {
  let repaired = false;
  let parsed = tryParseJson(text);
  if (!parsed.ok) {
    const fixed = repairUnescapedErrorMessage(text);
    const second = fixed === undefined ? undefined : tryParseJson(fixed);
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
