import type { Assistant } from '../../assistant/assistant.js';
import { GatewayError } from '../../errors.js';
import type { DeviceProfile } from './converse.js';
import type { TurnHandle, TurnPort, TurnRequest, TurnSignal } from './session/ports.js';

/** Spoken answers: what a voice device needs from the model beyond the assistant's own prompt. */
export const VOICE_PROMPT =
  'Your answer is spoken aloud by a small voice device: reply in one to three short sentences of plain text, ' +
  'no lists, no markdown, no links. When you use a tool, say briefly what you did.';

export interface VoiceTurnSettings {
  model?: string | undefined;
  persona?: string | undefined;
}

/**
 * The assistant's turn for a device's utterance: bound to the device (its tools first, then the hub's for its
 * tenant), streamed (synthesis starts with the first sentence), interactive (confirmations are asked aloud, one at a time),
 * in the device's conversation. A forgotten conversation starts afresh rather than failing the turn.
 */
export function assistantTurns(assistant: Assistant, settings: VoiceTurnSettings, profile: DeviceProfile): TurnPort {
  const system = [VOICE_PROMPT];
  if (settings.persona) system.push(settings.persona);
  if (profile.language) system.push(`Answer in the language with code "${profile.language}" unless the person speaks another.`);
  return {
    async start(req: TurnRequest, emit: (e: TurnSignal) => void): Promise<TurnHandle> {
      const ask = (conversationId: string | undefined) =>
        assistant.start(
          { message: req.text, deviceId: req.deviceId, conversationId, model: settings.model, system },
          // The device owns its voice conversation (principal.ts): no API key can read or answer it.
          // A device without a (voice) tenant is no operator: it reaches the devices without a tenant only, never a tenant's.
          { tenant: profile.tenant, principal: `device:${req.deviceId}`, ...(profile.tenant === undefined ? { untenantedOnly: true } : {}) },
          // Its questions are spoken one at a time: each window starts when the session has asked it (TurnHandle.asked).
          { stream: true, interactive: true, asksOneAtATime: true, emit },
        );
      let started;
      try {
        started = await ask(req.conversationId);
      } catch (e) {
        if (!(e instanceof GatewayError) || req.conversationId === undefined || (e.code !== 'NOT_FOUND' && e.code !== 'CONVERSATION_BUSY')) throw e;
        started = await ask(undefined);
      }
      const { turn, done } = started;
      const answer = done.then((r) => ({ text: r.text, conversationId: r.conversationId }));
      // A turn cancelled before the session awaits it (a wake word over the one starting) rejects unread: marked
      // handled here (awaiting it still rejects), so it is not an unhandled rejection per cancelled turn.
      answer.catch(() => undefined);
      return {
        cancel: (reason) => turn.cancel(reason),
        confirm: (callId, approve) => turn.confirm(callId, approve),
        asked: (callId) => turn.asked(callId),
        done: answer,
      };
    },
  };
}
