import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import type { VoiceDevice } from '../../src/devices/voice-hook.js';
import { createMetrics } from '../../src/metrics.js';
import type { ConverseKit } from '../../src/voice/converse/converse.js';
import { startVoice, type Voice } from '../../src/voice/start.js';

/** A WebSocket device as the voice side sees it: what it was sent, nothing else. */
function fakeDevice(): VoiceDevice & { sent: string[] } {
  const sent: string[] = [];
  return {
    deviceId: '02:00:00:00:00:01',
    clientId: 'c1',
    sessionId: 's1',
    state: 'ready',
    transport: 'websocket',
    remoteAddress: '127.0.0.1',
    sent,
    send: (text: string) => (sent.push(text), true),
    sendBinary: () => true,
    bufferedBytes: () => 0,
    close: () => undefined,
    awaitReady: () => Promise.resolve(),
    findTool: () => undefined,
    call: () => Promise.reject(new Error('no tools here')),
    rpc: () => Promise.reject(new Error('no rpc here')),
    applyVision: () => Promise.resolve('gateway'),
  } as unknown as VoiceDevice & { sent: string[] };
}

const hello = { type: 'hello', version: 1, transport: 'websocket', audio_params: { format: 'opus', sample_rate: 16000, channels: 1, frame_duration: 60 } };

describe('the conversation kit loads on first use (issue 21: idle memory)', () => {
  let voice: Voice | undefined;
  afterEach(() => voice?.close());

  it('a kit whose code fails to load refuses the conversation with a clear log line, and the next hello tries again', async () => {
    const lines: Array<{ msg?: string; err?: string }> = [];
    const log = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l) as { msg?: string; err?: string }) });
    const config = loadConfig({ GATEWAY_VOICE_MODE: 'converse', GATEWAY_VOICE_UDP_PORT: '0', GATEWAY_VOICE_UDP_HOST: '127.0.0.1' });
    let attempts = 0;
    const kit = (): Promise<ConverseKit> => {
      attempts++;
      return Promise.reject(new Error('the audio kit could not be loaded: boom'));
    };
    voice = await startVoice(config.voice, createMetrics(), log, { kit });
    const device = fakeDevice();
    await expect(voice.hook.onHello(device, hello)).resolves.toBe(false);
    expect(device.sent.some((t) => t.includes('failed to start'))).toBe(true);
    expect(lines.some((l) => l.msg === 'conversation could not start' && l.err?.includes('boom'))).toBe(true);
    await expect(voice.hook.onHello(device, hello)).resolves.toBe(false);
    expect(attempts).toBe(2);
  });

  it('a device that closed while the kit loaded gets no session', async () => {
    const config = loadConfig({ GATEWAY_VOICE_MODE: 'converse', GATEWAY_VOICE_UDP_PORT: '0', GATEWAY_VOICE_UDP_HOST: '127.0.0.1' });
    let release!: (k: ConverseKit) => void;
    const pending = new Promise<ConverseKit>((r) => (release = r));
    voice = await startVoice(config.voice, createMetrics(), pino({ level: 'silent' }), { kit: () => pending });
    const device = fakeDevice();
    const opened = voice.hook.onHello(device, hello);
    (device as { state: string }).state = 'closed';
    release({ close: () => undefined } as unknown as ConverseKit);
    await expect(opened).resolves.toBe(false);
    expect(voice.converse.activeCount).toBe(0);
    expect(device.sent).toEqual([]);
  });
});
