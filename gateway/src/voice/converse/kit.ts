import type { Logger } from 'pino';
import type { VoiceConfig } from '../relay.js';
import type { ConverseKit } from './converse.js';

/**
 * The codecs, detector and speech providers of voice.mode "converse", from voice.asr / voice.tts. Built by the
 * audio side (audio/, providers/); until it is merged a conversation is refused with an alert.
 */
export function createConverseKit(_config: VoiceConfig, _log: Logger): ConverseKit {
  throw new Error('speech audio is not part of this build');
}
