import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  classifyRpc,
  normalizeDeviceId,
  normalizeRpcError,
  parseDeviceFrame,
  parseMqttClientId,
  mqttPassword,
  parseRpc,
  verifyDeviceToken,
  mintDeviceToken,
} from '../src/index.js';

const dir = fileURLToPath(new URL('../vectors/', import.meta.url));
interface VectorFile<I, E> {
  description: string;
  key?: string;
  cases: Array<{ name: string; kind: 'valid' | 'quirky' | 'invalid'; input: I; expect: E }>;
}
const load = <I, E>(name: string): VectorFile<I, E> => JSON.parse(readFileSync(dir + name, 'utf8')) as VectorFile<I, E>;

describe('vectors', () => {
  it('every vector file is used by a test below', () => {
    expect(readdirSync(dir).sort()).toEqual([
      'device-id.json',
      'device-token.json',
      'envelope.json',
      'jsonrpc.json',
      'mqtt-identity.json',
      'voice-binary.json',
      'voice-udp.json',
    ]);
  });

  const env = load<
    string,
    { ok: boolean; type?: string; sessionId?: string | null; hasPayload?: boolean; reason?: string; repaired?: boolean; errorMessage?: string }
  >('envelope.json');
  it.each(env.cases.map((c) => [`${c.kind}: ${c.name}`, c] as const))('envelope %s', (_, c) => {
    const r = parseDeviceFrame(c.input);
    expect(r.ok).toBe(c.expect.ok);
    if (!r.ok) {
      expect(r.reason).toBe(c.expect.reason);
      return;
    }
    const f = r.value.frame;
    expect(f.type).toBe(c.expect.type);
    expect(f.session_id ?? null).toBe(c.expect.sessionId);
    expect('payload' in f).toBe(c.expect.hasPayload);
    expect(r.value.repaired).toBe(c.expect.repaired ?? false);
    if (c.expect.errorMessage !== undefined) {
      const payload = f['payload'] as { error: { message: string } };
      expect(payload.error.message).toBe(c.expect.errorMessage);
    }
  });

  const rpc = load<string, { ok: boolean; kind?: string; id?: unknown; method?: string; code?: number; normalizedCode?: number }>('jsonrpc.json');
  it.each(rpc.cases.map((c) => [`${c.kind}: ${c.name}`, c] as const))('jsonrpc %s', (_, c) => {
    const r = parseRpc(c.input);
    expect(r.ok).toBe(c.expect.ok);
    if (!r.ok) {
      expect(r.code).toBe(c.expect.code);
      return;
    }
    const m = r.message;
    expect(m.kind).toBe(c.expect.kind);
    expect('id' in m.msg ? m.msg.id : null).toEqual(c.expect.id);
    if (c.expect.method !== undefined) expect('method' in m.msg ? m.msg.method : undefined).toBe(c.expect.method);
    if (m.kind === 'error') {
      const n = normalizeRpcError(m.msg.error);
      if (c.expect.code !== undefined) expect(n).toMatchObject({ code: c.expect.code, inferredCode: false });
      if (c.expect.normalizedCode !== undefined) expect(n).toMatchObject({ code: c.expect.normalizedCode, inferredCode: true });
    }
  });

  const ident = load<{ clientId: string; username?: string }, { ok: boolean; group?: string; deviceId?: string; uuid?: string; password?: string }>(
    'mqtt-identity.json',
  );
  it.each(ident.cases.map((c) => [`${c.kind}: ${c.name}`, c] as const))('mqtt identity %s', (_, c) => {
    const id = parseMqttClientId(c.input.clientId);
    expect(id !== undefined).toBe(c.expect.ok);
    if (!id) return;
    expect(id.group).toBe(c.expect.group);
    expect(id.deviceId).toBe(c.expect.deviceId);
    expect(id.uuid).toBe(c.expect.uuid);
    if (c.expect.password) expect(mqttPassword(ident.key!, c.input.clientId, c.input.username!)).toBe(c.expect.password);
  });

  const tok = load<{ clientId: string; deviceId: string; token: string; now: number; maxAge: number }, { ok: boolean; issuedAt?: number; reason?: string }>(
    'device-token.json',
  );
  it.each(tok.cases.map((c) => [`${c.kind}: ${c.name}`, c] as const))('device token %s', (_, c) => {
    const { clientId, deviceId, token, now, maxAge } = c.input;
    const r = verifyDeviceToken(tok.key!, token, clientId, deviceId, { nowSeconds: now, maxAgeSeconds: maxAge });
    expect(r).toEqual(c.expect.ok ? { ok: true, issuedAt: c.expect.issuedAt } : { ok: false, reason: c.expect.reason });
    if (c.expect.ok) expect(mintDeviceToken(tok.key!, clientId, deviceId, c.expect.issuedAt!)).toBe(token);
  });

  const ids = load<string, { ok: boolean; deviceId?: string }>('device-id.json');
  it.each(ids.cases.map((c) => [`${c.kind}: ${c.name}`, c] as const))('device id %s', (_, c) => {
    expect(normalizeDeviceId(c.input)).toBe(c.expect.ok ? c.expect.deviceId : undefined);
  });

  it('classifyRpc rejects what parseRpc rejects once parsed', () => {
    expect(classifyRpc(null)).toMatchObject({ ok: false, code: -32600 });
  });
});
