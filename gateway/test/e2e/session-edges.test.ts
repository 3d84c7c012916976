import { WebSocket } from 'ws';
import { describe, expect, it } from 'vitest';
import { startTestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { once, until } from '../../../test/support/wait.js';

describe('device sessions at the edges', () => {
  it('closes a WebSocket device that never says hello (4002)', async () => {
    const t = await startTestGateway({ session: { requestTimeoutMs: 300 } });
    try {
      const d = new ReferenceDevice({ deviceId: '02:00:00:00:05:01' });
      await d.connectWebSocket(t.wsUrl, { skipHello: true });
      expect(await d.closed()).toMatchObject({ code: 4002 });
    } finally {
      await t.close();
    }
  });

  it('keeps retrying the initialize of a connected device that does not answer, and says so to callers', async () => {
    const t = await startTestGateway({ session: { requestTimeoutMs: 300, setupRetryMinMs: 20, setupRetryMaxMs: 50 } });
    try {
      // A bare client that says hello and then ignores every request: busy, not gone (its link is up).
      const ws = new WebSocket(t.wsUrl, { headers: { 'device-id': '02:00:00:00:05:02', 'client-id': 'mute' } });
      await once(ws, 'open');
      ws.send(JSON.stringify({ type: 'hello', version: 1, transport: 'websocket', features: { mcp: true } }));
      await until(
        () => t.logs.some((l) => l['msg'] === 'device setup step failed; retrying while the link is up' && l['deviceId'] === '02:00:00:00:05:02'),
        'a setup retry',
      );
      expect((await t.api<{ state: string }>('GET', '/v1/devices/02:00:00:00:05:02')).body.state).toBe('initializing');
      const tools = await t.api<{ code: string }>('GET', '/v1/devices/02:00:00:00:05:02/tools');
      expect([tools.status, tools.body.code]).toEqual([503, 'DEVICE_NOT_READY']);
      const r = await t.api<{ code: string; detail: string }>('POST', '/v1/devices/02:00:00:00:05:02/tools/x/call', { timeoutMs: 400 });
      expect([r.status, r.body.code]).toEqual([504, 'DEVICE_TIMEOUT']);
      expect(r.body.detail).toContain('initializ');
      ws.terminate();
    } finally {
      await t.close();
    }
  });

  it('marks a device whose initialize replies stay malformed as failed after setupMaxErrors, and says so', async () => {
    const t = await startTestGateway({ session: { requestTimeoutMs: 2000, setupRetryMinMs: 10, setupRetryMaxMs: 20, setupMaxErrors: 2 } });
    try {
      const ws = new WebSocket(t.wsUrl, { headers: { 'device-id': '02:00:00:00:05:05', 'client-id': 'garbled' } });
      await once(ws, 'open');
      ws.on('message', (data: Buffer) => {
        const f = JSON.parse(data.toString()) as { type: string; payload?: { id?: number } };
        if (f.type === 'mcp' && f.payload?.id !== undefined)
          ws.send(JSON.stringify({ type: 'mcp', payload: { jsonrpc: '2.0', id: f.payload.id, result: { protocolVersion: 7 } } }));
      });
      ws.send(JSON.stringify({ type: 'hello', version: 1, transport: 'websocket', features: { mcp: true } }));
      await expect.poll(async () => (await t.api<{ state: string }>('GET', '/v1/devices/02:00:00:00:05:05')).body.state, { timeout: 5000 }).toBe('failed');
      const r = await t.api<{ code: string; detail: string }>('POST', '/v1/devices/02:00:00:00:05:05/tools/x/call', {});
      expect([r.status, r.body.code]).toEqual([502, 'DEVICE_ERROR']);
      expect(t.logs.some((l) => l['msg'] === 'device initialization failed' && l['deviceId'] === '02:00:00:00:05:05')).toBe(true);
      ws.terminate();
    } finally {
      await t.close();
    }
  });

  it('answers pending calls with SHUTTING_DOWN when the gateway stops', async () => {
    const t = await startTestGateway();
    const d = new ReferenceDevice({ deviceId: '02:00:00:00:05:03' });
    const ready = t.nextEvent('device.ready', d.deviceId);
    await d.connectWebSocket(t.wsUrl);
    await ready;
    d.holdReplies();
    const pending = t.api<{ code: string }>('POST', `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: 1 } });
    await d.waitForMcp((p) => p['method'] === 'tools/call');
    const closing = t.close();
    const r = await pending;
    expect([r.status, r.body.code]).toEqual([503, 'SHUTTING_DOWN']);
    expect((await d.closed()).code).toBe(1001);
    await closing;
  });

  it('logs every line with the device id and never a secret', async () => {
    const t = await startTestGateway({ deviceAuth: 'token', deviceTokens: ['super-secret-device-token'], vision: { url: 'http://127.0.0.1:9/v' } });
    try {
      const d = new ReferenceDevice({ deviceId: '02:00:00:00:05:04' });
      const ready = t.nextEvent('device.ready', d.deviceId);
      await d.connectWebSocket(t.wsUrl, { token: 'super-secret-device-token' });
      await ready;
      const deviceLines = t.logs.filter((l) => l['msg'] === 'device connected' || l['msg'] === 'device ready');
      expect(deviceLines.length).toBe(2);
      for (const l of deviceLines) expect(l['deviceId']).toBe(d.deviceId);
      const all = JSON.stringify(t.logs);
      expect(all).not.toContain('super-secret-device-token');
      expect(all).not.toContain(d.vision!.token!);
      expect(all).not.toContain('test-api-key-0123456789');
      d.terminate();
    } finally {
      await t.close();
    }
  });
});
