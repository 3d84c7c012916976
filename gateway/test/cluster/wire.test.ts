import type { Msg } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import {
  callSubject,
  catalogKey,
  deviceOfKey,
  eventSubject,
  ForwardedCall,
  ForwardedReply,
  PresenceEntry,
  presenceKey,
  RelayedEvent,
  StoredCatalog,
} from '../../src/cluster/wire.js';
import { messageText, parseMessage } from '../../src/cluster/wire-message.js';

const msg = (text: string): Msg => ({ data: new TextEncoder().encode(text) }) as Msg;

/** What instances tell each other: nothing from the bus is trusted to be well-formed. */
describe('cluster wire schemas', () => {
  it('reads a presence entry, defaulting the tool count, and refuses unknown states or oversized fields', () => {
    const ok = PresenceEntry.parse({ instance: 'gw-1', state: 'ready', transport: 'mqtt', clientId: 'c', connectedAt: '2026-11-26T08:00:00Z' });
    expect(ok.toolCount).toBe(0);
    for (const bad of [
      { instance: 'gw 1', state: 'ready', transport: 'mqtt', clientId: 'c', connectedAt: '' },
      { instance: 'gw-1', state: 'sleeping', transport: 'mqtt', clientId: 'c', connectedAt: '' },
      { instance: 'gw-1', state: 'ready', transport: 'udp', clientId: 'c', connectedAt: '' },
      { instance: 'gw-1', state: 'ready', transport: 'mqtt', clientId: 'c'.repeat(257), connectedAt: '' },
      { instance: 'gw-1', state: 'ready', transport: 'mqtt', clientId: 'c', connectedAt: '', toolCount: -1 },
    ])
      expect(PresenceEntry.safeParse(bad).success, JSON.stringify(bad).slice(0, 80)).toBe(false);
  });

  it('normalizes the device id of a forwarded call and refuses one that is not a MAC', () => {
    expect(ForwardedCall.parse({ op: 'call', deviceId: 'AA-BB-CC-DD-EE-01', name: 'self.x', args: {} })).toMatchObject({ deviceId: 'aa:bb:cc:dd:ee:01' });
    expect(ForwardedCall.parse({ op: 'ping' })).toEqual({ op: 'ping' });
    for (const bad of [
      { op: 'call', deviceId: 'kitchen', name: 'x', args: {} },
      { op: 'call', deviceId: 'aa:bb:cc:dd:ee:01', name: '', args: {} },
      { op: 'call', deviceId: 'aa:bb:cc:dd:ee:01', name: 'x', args: {}, timeoutMs: 0 },
      { op: 'reboot', deviceId: 'aa:bb:cc:dd:ee:01' },
    ])
      expect(ForwardedCall.safeParse(bad).success, JSON.stringify(bad)).toBe(false);
  });

  it('reads an owner’s reply: a result, or an error with a known code', () => {
    expect(ForwardedReply.parse({ ok: true, result: { content: [] } })).toEqual({ ok: true, result: { content: [] } });
    expect(ForwardedReply.parse({ ok: false, code: 'DEVICE_TIMEOUT', message: 'late' })).toEqual({
      ok: false,
      code: 'DEVICE_TIMEOUT',
      message: 'late',
      extra: {},
    });
    expect(ForwardedReply.safeParse({ ok: false, code: 'MADE_UP', message: 'x' }).success).toBe(false);
    expect(ForwardedReply.safeParse({ ok: false, code: 'INTERNAL', message: 'x'.repeat(4097) }).success).toBe(false);
  });

  it('reads a relayed event with the origin’s id, and refuses an unknown type or a malformed id', () => {
    const e = { origin: 'gw-2', type: 'device.online', deviceId: 'aa_bb_cc_dd_ee_01', data: {}, id: 'k3x9-12', at: '2026-11-26T08:00:00Z' };
    expect(RelayedEvent.parse(e)).toMatchObject({ deviceId: 'aa:bb:cc:dd:ee:01', id: 'k3x9-12' });
    expect(RelayedEvent.safeParse({ ...e, type: 'device.exploded' }).success).toBe(false);
    expect(RelayedEvent.safeParse({ ...e, id: 'not an id' }).success).toBe(false);
    // The tenant it was published under: a tenant's name, null for none, absent from an older instance.
    expect([RelayedEvent.parse({ ...e, tenant: 'acme' }).tenant, RelayedEvent.parse({ ...e, tenant: null }).tenant, RelayedEvent.parse(e).tenant]).toEqual([
      'acme',
      null,
      undefined,
    ]);
    for (const tenant of ['', 'a b', 'x'.repeat(65), 7]) expect(RelayedEvent.safeParse({ ...e, tenant }).success).toBe(false);
  });

  it('bounds a stored catalog', () => {
    const tool = { name: 't', description: 'd', inputSchema: {}, userOnly: false };
    expect(StoredCatalog.safeParse({ tools: [tool] }).success).toBe(true);
    expect(StoredCatalog.safeParse({ tools: [{ ...tool, name: '' }] }).success).toBe(false);
    expect(StoredCatalog.safeParse({ tools: Array.from({ length: 10_001 }, () => tool) }).success).toBe(false);
  });

  it('names keys and subjects, and reads a device back from its presence key', () => {
    expect(presenceKey('aa:bb:cc:dd:ee:01')).toBe('dev.aa_bb_cc_dd_ee_01');
    expect(deviceOfKey(presenceKey('aa:bb:cc:dd:ee:01'))).toBe('aa:bb:cc:dd:ee:01');
    expect(deviceOfKey('cat.abc')).toBeUndefined();
    expect(deviceOfKey('dev.kitchen')).toBeUndefined();
    expect(catalogKey('h1')).toBe('cat.h1');
    expect(callSubject('gw-1')).toBe('voxgate.call.gw-1');
    expect(eventSubject('aa:bb:cc:dd:ee:01', 'device.online')).toBe('voxgate.events.aa:bb:cc:dd:ee:01.device.online');
  });
});

describe('parseMessage', () => {
  it('parses a message with its schema, and answers undefined for what is too large, not JSON or not valid', () => {
    const ping = JSON.stringify({ op: 'ping' });
    expect(parseMessage(msg(ping), ForwardedCall, 1024)).toEqual({ op: 'ping' });
    expect(parseMessage(msg(ping), ForwardedCall, ping.length - 1)).toBeUndefined();
    expect(parseMessage(msg('{"op":'), ForwardedCall, 1024)).toBeUndefined();
    expect(parseMessage(msg('{"op":"reboot"}'), ForwardedCall, 1024)).toBeUndefined();
    expect(messageText(msg('ping'))).toBe('ping');
  });
});
