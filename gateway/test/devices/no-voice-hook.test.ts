import { describe, expect, it } from 'vitest';
import { metricValue, silentLog, sessionPair } from '../../../test/support/device-parts.js';
import { NoVoiceHook } from '../../src/devices/no-voice-hook.js';

describe('the default (no-voice) voice hook', () => {
  it('answers a WebSocket hello with the server hello of the session: MCP may start', async () => {
    const { session, device } = sessionPair();
    const hook = new NoVoiceHook(silentLog);
    expect(hook.onHello(session)).toBe(true);
    const hello = JSON.parse(await device.next()) as Record<string, unknown>;
    expect(hello).toMatchObject({ type: 'hello', transport: 'websocket', session_id: session.sessionId });
  });

  it('tells an MQTT device at once that there is no voice: a UDP hello with no server, then a goodbye', async () => {
    const { session, device } = sessionPair({ transport: 'mqtt' });
    const hook = new NoVoiceHook(silentLog);
    expect(hook.onHello(session)).toBe(false);
    const hello = JSON.parse(await device.next()) as { type: string; transport: string; session_id: string; udp: { server: string } };
    const goodbye = JSON.parse(await device.next()) as { type: string; session_id: string };
    expect(hello.type).toBe('hello');
    expect(hello.transport).toBe('udp');
    expect(hello.udp.server).toBe('');
    expect(goodbye).toEqual({ type: 'goodbye', session_id: hello.session_id });
  });

  it('takes no audio and no other JSON', async () => {
    const { session, metrics } = sessionPair();
    const hook = new NoVoiceHook(silentLog);
    expect(hook.onAudio()).toBe(false);
    expect(hook.onJson()).toBe(false);
    expect(() => hook.onClosed()).not.toThrow();
    // The session counts the audio no one takes, and drops it.
    const before = await metricValue(metrics, 'voxgate_audio_bytes_received_total');
    session.onBinary(Buffer.from([1, 2, 3]));
    expect(await metricValue(metrics, 'voxgate_audio_bytes_received_total')).toBe(before + 3);
  });
});
