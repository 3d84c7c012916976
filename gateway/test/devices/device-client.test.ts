import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { answerSetup, metricValue, sessionPair } from '../../../test/support/device-parts.js';
import type { CallOutcome } from '../../src/devices/device-handle.js';

const PING = { name: 'self.ping', description: 'the ping tool', inputSchema: { type: 'object', properties: {} } };
const reply = (id: number, result: unknown) => JSON.stringify({ session_id: '', type: 'mcp', payload: { jsonrpc: '2.0', id, result } });
const callsSent = (frames: string[]) => frames.filter((f) => f.includes('"tools/call"')).length;

/** A WebSocket session past its hello and setup; `log` gets the session's log lines. */
async function readySession(log?: (line: Record<string, unknown>) => void) {
  const deps = log ? { log: pino({ level: 'debug' }, { write: (s: string) => log(JSON.parse(s) as Record<string, unknown>) }) } : {};
  const t = sessionPair({ deps });
  t.session.start();
  t.device.send(JSON.stringify({ type: 'hello', version: 1, transport: 'websocket', features: { mcp: true } }));
  await answerSetup(t.device, [PING]);
  await expect.poll(() => t.session.state).toBe('ready');
  return t;
}

describe('DeviceClient: one device, calls waiting their turn', () => {
  it('sends the next queued call in the turn its predecessor’s reply is handled, before that caller hears', async () => {
    const { session, device } = await readySession();
    const heard: number[] = [];
    const results: CallOutcome[] = [];
    const done = (out: CallOutcome) => {
      heard.push(callsSent(device.frames));
      results.push(out);
    };
    const failed = (e: unknown) => {
      throw e;
    };
    session.callThen('self.ping', {}, {}, done, failed);
    session.callThen('self.ping', {}, {}, done, failed);
    const first = await device.nextRequest('tools/call');
    expect(callsSent(device.frames)).toBe(1); // one at a time: the second waits for the first's reply
    // The reply is handled here, synchronously, as a link hands a frame over: no later turn is awaited.
    session.onText(reply(first.id, { content: [{ type: 'text', text: 'one' }] }));
    expect(callsSent(device.frames)).toBe(2);
    expect(heard).toEqual([2]); // the first caller heard after the second call went out
    const second = await device.nextRequest('tools/call');
    session.onText(reply(second.id, { content: [{ type: 'text', text: 'two' }] }));
    expect(results.map((r) => r.content)).toEqual([[{ type: 'text', text: 'one' }], [{ type: 'text', text: 'two' }]]);
  });

  it('sends the next queued call before the reply’s result is read: a result on the schema path is checked after', async () => {
    const order: string[] = [];
    const sent: { frames?: string[] } = {};
    const t = await readySession((line) => {
      if (typeof line['msg'] === 'string' && line['msg'].includes('not valid MCP content')) order.push(`read, ${callsSent(sent.frames ?? [])} sent`);
    });
    sent.frames = t.device.frames;
    const { session, device, metrics } = t;
    const first = session.call('self.ping', {});
    const second = session.call('self.ping', {});
    const r1 = await device.nextRequest('tools/call');
    // A content item that is not valid MCP content: the result takes the schema path, which logs it when it reads it.
    session.onText(reply(r1.id, { content: [{ type: 'text', text: 42 }] }));
    expect(order).toEqual(['read, 2 sent']);
    expect((await first).content).toEqual([{ type: 'text', text: '42' }]);
    expect(await metricValue(metrics, 'voxgate_calls_total', { outcome: 'ok_malformed_content' })).toBe(1);
    const r2 = await device.nextRequest('tools/call');
    device.reply(r2.id, { content: [{ type: 'text', text: 'fine' }] });
    expect((await second).content).toEqual([{ type: 'text', text: 'fine' }]);
  });

  it('sends the next queued call when a reply is a device error, and counts the error', async () => {
    const { session, device, metrics } = await readySession();
    const first = session.call('self.ping', {}).catch((e: unknown) => e);
    const second = session.call('self.ping', {});
    const r1 = await device.nextRequest('tools/call');
    session.onText(JSON.stringify({ session_id: '', type: 'mcp', payload: { jsonrpc: '2.0', id: r1.id, error: { code: -32000, message: 'no' } } }));
    expect(callsSent(device.frames)).toBe(2);
    expect(await first).toMatchObject({ code: 'DEVICE_ERROR' });
    expect(await metricValue(metrics, 'voxgate_calls_total', { outcome: 'device_error' })).toBe(1);
    const r2 = await device.nextRequest('tools/call');
    device.reply(r2.id, { content: [] });
    expect((await second).content).toEqual([]);
  });
});
