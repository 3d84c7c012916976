import { describe, expect, it } from 'vitest';
import { PendingRequest } from '../../src/devices/rpc-channel.js';
import { GatewayError } from '../../src/errors.js';
import { channelPair, metricValue } from '../../../test/support/device-parts.js';

describe('RpcChannel: requests and the matching of their replies', () => {
  it('sends small integer ids in the MCP envelope and settles each request with its own reply', async () => {
    const { channel, device } = channelPair();
    const a = channel.request('ping', undefined, 1000);
    const b = channel.request('tools/list', { withUserTools: true }, 1000);
    const ra = await device.nextRequest('ping');
    const rb = await device.nextRequest('tools/list');
    expect([ra.id, rb.id]).toEqual([1, 2]);
    expect(JSON.parse(device.frames[0]!)).toMatchObject({ session_id: 's-1', type: 'mcp', payload: { jsonrpc: '2.0', id: 1, method: 'ping' } });
    expect(channel.pendingCount).toBe(2);
    // Replies in the other order still find their requests.
    channel.onResult(rb.id, { tools: [] });
    channel.onResult(ra.id, {});
    await expect(b).resolves.toEqual({ tools: [] });
    await expect(a).resolves.toEqual({});
    expect(channel.pendingCount).toBe(0);
  });

  it('names the method and the timeout the caller asked for when no reply comes', async () => {
    const { channel } = channelPair();
    const err = await channel.request('tools/call', {}, 20, { reportedMs: 2000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GatewayError);
    expect((err as GatewayError).code).toBe('DEVICE_TIMEOUT');
    expect((err as GatewayError).message).toBe('device 02:00:00:00:00:01 did not answer tools/call within 2000 ms');
  });

  it('lets its timer go when nothing is pending (a device just ready), and times the next request with a new one', async () => {
    const { channel, device } = channelPair();
    const a = channel.request('tools/list', {}, 60_000);
    const b = channel.request('ping', undefined, 60_000);
    channel.releaseTimer(); // requests pending: kept
    channel.onResult((await device.nextRequest('tools/list')).id, { tools: [] });
    channel.onResult((await device.nextRequest('ping')).id, {});
    await Promise.all([a, b]);
    channel.releaseTimer();
    const err = await channel.request('ping', undefined, 20).catch((e: unknown) => e);
    expect((err as GatewayError).code).toBe('DEVICE_TIMEOUT');
  });

  it('counts a reply that matches no pending request (late or unknown) and drops it', async () => {
    const { channel, metrics } = channelPair();
    await channel.request('ping', undefined, 10).catch(() => undefined);
    channel.onResult(1, {});
    channel.onResult('not-ours', {});
    expect(await metricValue(metrics, 'voxgate_late_replies_total')).toBe(2);
  });

  it('fails a request with the device error, its code, and the method', async () => {
    const { channel, device } = channelPair();
    const p = channel.request('tools/call', {}, 1000);
    const r = await device.nextRequest();
    channel.onError(r.id, { code: -32602, message: 'bad args' });
    const err = (await p.catch((e: unknown) => e)) as GatewayError;
    expect(err.code).toBe('DEVICE_ERROR');
    expect(err.message).toBe('bad args');
    expect(err.extra).toMatchObject({ rpcCode: -32602, method: 'tools/call' });
  });

  it('settles a request whose reply was refused unread (not JSON, over the size limit) at once', async () => {
    const { channel, device } = channelPair();
    const a = channel.request('tools/call', {}, 5000);
    const b = channel.request('tools/call', {}, 5000);
    await device.nextRequest();
    channel.refuseReply('{"session_id":"","type":"mcp","payload":{"jsonrpc":"2.0","id":1,"result":{oops', 'not_json', 'Unexpected token');
    channel.refuseOversized(900_000, 8192, '{"session_id":"","type":"mcp","payload":{"jsonrpc":"2.0","id":2,"result":');
    const ea = (await a.catch((e: unknown) => e)) as GatewayError;
    const eb = (await b.catch((e: unknown) => e)) as GatewayError;
    expect(ea.message).toMatch(/^device sent a reply that is not JSON: \{"session_id"/);
    expect(ea.extra).toMatchObject({ unparsable: true, reason: 'not_json' });
    expect(eb.message).toBe('device reply of 900000 bytes exceeds the 8192-byte limit (mqtt.maxPacketBytes); it was refused');
  });

  it('is offline once closed, and when the link refuses to send', async () => {
    const { channel, link, close } = channelPair();
    link.close(1000, 'bye');
    await expect(channel.request('ping', undefined, 1000)).rejects.toMatchObject({ code: 'DEVICE_OFFLINE' });
    close();
    const offline = { code: 'DEVICE_OFFLINE', message: 'device 02:00:00:00:00:01 is offline' };
    await expect(channel.request('ping', undefined, 1000)).rejects.toMatchObject(offline);
    expect(channel.pendingCount).toBe(0);
  });

  it('lets a raw reader take the reply of its own request only', async () => {
    const { channel, device } = channelPair();
    const reader = { read: (text: string, id: number) => (text === `raw-${id}` ? { taken: id } : undefined) };
    const p = channel.request('tools/list', {}, 1000, { raw: reader });
    const r = await device.nextRequest();
    expect(channel.takeRaw('raw-99')).toBe(false);
    expect(channel.takeRaw(`raw-${r.id}`)).toBe(true);
    await expect(p).resolves.toEqual({ taken: r.id });
    // Settled: the reader is gone with its request.
    expect(channel.takeRaw(`raw-${r.id}`)).toBe(false);
  });

  it('fails every pending request at once', async () => {
    const { channel } = channelPair();
    const all = [channel.request('a', undefined, 5000), channel.request('b', undefined, 5000)];
    channel.failAll(new GatewayError('SHUTTING_DOWN', 'the gateway is shutting down'));
    for (const p of all) await expect(p).rejects.toMatchObject({ code: 'SHUTTING_DOWN' });
    expect(channel.pendingCount).toBe(0);
  });

  it("keeps the caller's own object as the pending request: fills in its id and method, and tells it the outcome", async () => {
    const { channel, device } = channelPair();
    const outcomes: unknown[] = [];
    class Caller extends PendingRequest {
      resolve(result: unknown): void {
        outcomes.push(result);
      }
      reject(err: GatewayError): void {
        outcomes.push(err.code);
      }
    }
    const a = new Caller();
    const b = new Caller();
    channel.requestFor(a, 'tools/call', { name: 'x', arguments: {} }, 1000);
    channel.requestFor(b, 'ping', undefined, 1000);
    const [ra, rb] = [await device.nextRequest('tools/call'), await device.nextRequest('ping')];
    expect([a.rpcId, a.rpcMethod, b.rpcId, b.rpcMethod]).toEqual([ra.id, 'tools/call', rb.id, 'ping']);
    expect(channel.pendingCount).toBe(2);
    channel.onError(rb.id, { code: -32601, message: 'no such method' });
    channel.onResult(ra.id, { content: [] });
    expect(outcomes).toEqual(['DEVICE_ERROR', { content: [] }]);
    expect(channel.pendingCount).toBe(0);
  });
});
