import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { joinDevice } from '../../../test/support/join-device.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

/**
 * Regression fuzz (issue 8): generated hostile frames from one WebSocket and one MQTT device, pipelined,
 * while two healthy devices are called the whole time. Zero crashes, zero failed healthy calls, zero
 * frames that reach the per-connection safety net. Seeded and bounded; run longer with
 * FUZZ_FRAMES=1000000 (and another FUZZ_SEED) — see docs/security.md.
 */
const FRAMES = Number(process.env['FUZZ_FRAMES'] ?? 100_000);
const SEED = Number(process.env['FUZZ_SEED'] ?? 20261122);
const BATCH = 2000;
/** Frames over this (but under the links' 64 KiB) are refused at the parse boundary, not by the link. */
const FRAME_MAX_BYTES = 16 * 1024;
const LINK_MAX_BYTES = 60 * 1024;

// ---------------------------------------------------------------- arbitraries: JSON *text*, so keys like
// "__proto__", duplicate keys and invalid surrogates reach the gateway exactly as written.

const PROTO_KEYS = ['__proto__', 'constructor', 'prototype', 'toString', 'valueOf', 'hasOwnProperty', '__defineGetter__'];
const WIRE_KEYS = [
  'type',
  'session_id',
  'payload',
  'jsonrpc',
  'id',
  'method',
  'params',
  'result',
  'error',
  'code',
  'message',
  'tools',
  'nextCursor',
  'inputSchema',
  'content',
  'isError',
];
const str = (s: string) => JSON.stringify(s);
const obj = (entries: ReadonlyArray<readonly [string, string]>) => `{${entries.map(([k, v]) => `${str(k)}:${v}`).join(',')}}`;

const weird = fc.oneof(
  fc.string({ maxLength: 24 }),
  fc.string({ unit: 'binary', maxLength: 24 }),
  fc.string({ unit: 'grapheme', maxLength: 12 }),
  fc.constantFrom('', '\u0000', '\ud800', '\udc00x', '\u202e', '😀', '"', '\\', '}', '{"', 'x'.repeat(300)),
);
const key = fc.oneof(fc.constantFrom(...PROTO_KEYS, ...WIRE_KEYS), weird);
const deep = fc.oneof(
  // around the limit (64)
  {
    arbitrary: fc
      .tuple(fc.integer({ min: 1, max: 200 }), fc.constantFrom('[', '{"a":', '[{"b":'), fc.constantFrom('1', '"x"', '[]', '{}'))
      .map(([depth, open, leaf]) => {
        const close = open === '[' ? ']' : open === '{"a":' ? '}' : '}]';
        return open.repeat(depth) + leaf + close.repeat(depth);
      }),
    weight: 20,
  },
  // far past it: thousands of levels overflow a recursive JSON.stringify
  { arbitrary: fc.integer({ min: 5000, max: 8000 }).map((depth) => '['.repeat(depth) + ']'.repeat(depth)), weight: 1 },
);
const protoObject = fc.array(fc.tuple(key, fc.json({ maxDepth: 2 })), { maxLength: 5 }).map(obj);
const value: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.json({ maxDepth: 3 }), weight: 4 },
  { arbitrary: deep, weight: 2 },
  { arbitrary: protoObject, weight: 2 },
  { arbitrary: weird.map(str), weight: 2 },
  { arbitrary: fc.constantFrom('1e308', '-0', '1.5', '9007199254740993', 'null', 'true', '[]', '{}'), weight: 1 },
);
const id = fc.oneof(
  { arbitrary: fc.integer({ min: -2, max: 40 }).map(String), weight: 5 }, // our ids, past and future (replies before requests)
  { arbitrary: fc.constantFrom('1.5', '-0', '1e3', '9007199254740993', 'null', '"1"', '""', 'true', '[]', '{}'), weight: 2 },
  { arbitrary: weird.map(str), weight: 1 },
);
const method = fc.oneof(
  fc
    .constantFrom('notifications/tools/list_changed', 'notifications/state_changed', 'tools/call', 'tools/list', 'initialize', '', 'constructor', '__proto__')
    .map(str),
  weird.map(str),
  value,
);
const schema = fc.oneof(
  fc.constantFrom(
    '{"type":"object"}',
    '{"type":"object","properties":{"s":{"type":"string","pattern":"^(a|a)*$"}}}',
    '{"type":"object","patternProperties":{"(x+x+)+y":{"type":"string"}}}',
    '{"type":"object","properties":{"__proto__":{"type":"integer"},"$id":{"$id":"urn:x"}}}',
    '{"$ref":"urn:x"}',
  ),
  value,
);
const tool = fc
  .tuple(
    fc.oneof(fc.constantFrom('self.audio_speaker.set_volume', 'self.reboot', 'x'), weird),
    schema,
    fc.option(fc.constantFrom('{"audience":["user"]}', '{"audience":"user"}', '[]')),
  )
  .map(([name, inputSchema, annotations]) =>
    obj([['name', str(name)], ['inputSchema', inputSchema], ...(annotations ? [['annotations', annotations] as const] : [])]),
  );
const page = fc
  .tuple(fc.array(tool, { maxLength: 4 }), fc.option(fc.oneof(weird.map(str), fc.constant('1'))))
  .map(([tools, cursor]) => `{"tools":[${tools.join(',')}]${cursor === null ? '' : `,"nextCursor":${cursor}`}}`);
const callResult = fc
  .tuple(fc.array(value, { maxLength: 3 }), fc.constantFrom('true', 'false', '"yes"', 'null'))
  .map(([content, isError]) => `{"content":[${content.join(',')}],"isError":${isError}}`);
const result = fc.oneof(value, page, callResult);
const payload = fc.oneof(
  fc.tuple(id, result).map(([i, r]) => `{"jsonrpc":"2.0","id":${i},"result":${r}}`),
  fc
    .tuple(id, fc.option(fc.integer()), value, fc.option(value))
    .map(
      ([i, code, msg, data]) =>
        `{"jsonrpc":"2.0","id":${i},"error":{${code === null ? '' : `"code":${code},`}"message":${msg}${data === null ? '' : `,"data":${data}`}}}`,
    ),
  fc.tuple(method, value).map(([m, p]) => `{"jsonrpc":"2.0","method":${m},"params":${p}}`),
  fc.tuple(id, method, value).map(([i, m, p]) => `{"jsonrpc":"2.0","id":${i},"method":${m},"params":${p}}`),
  fc.tuple(id, id, result).map(([a, b, r]) => `{"jsonrpc":"2.0","id":${a},"result":${r},"id":${b}}`), // duplicate ids
  fc.tuple(fc.constantFrom('"1.0"', '2', 'null', '"2.0 "'), id, result).map(([v, i, r]) => `{"jsonrpc":${v},"id":${i},"result":${r}}`),
  protoObject,
);
const sid = fc.oneof(fc.constant('"s"'), weird.map(str), fc.constantFrom('null', '1', '""'));
const type = fc.oneof(fc.constantFrom('"mcp"', '"hello"', '"listen"', '"abort"', '"goodbye"', '"tts"', '""', '1', 'null', '"constructor"'), weird.map(str));
const frame: fc.Arbitrary<string> = fc
  .oneof(
    // the reference layout, which the tools/list fast path reads
    {
      arbitrary: fc.tuple(sid, id, result).map(([s, i, r]) => `{"session_id":${s},"type":"mcp","payload":{"jsonrpc":"2.0","id":${i},"result":${r}}}`),
      weight: 3,
    },
    { arbitrary: fc.tuple(sid, payload).map(([s, p]) => `{"session_id":${s},"type":"mcp","payload":${p}}`), weight: 6 },
    { arbitrary: fc.tuple(type, key, value).map(([t, k, v]) => `{"type":${t},${str(k)}:${v}}`), weight: 3 },
    { arbitrary: payload, weight: 1 },
    { arbitrary: fc.string({ unit: 'binary', maxLength: 200 }), weight: 1 },
    { arbitrary: fc.tuple(payload, fc.nat()).map(([p, n]) => `{"type":"mcp","payload":${p}}`.slice(0, n % 200)), weight: 1 }, // truncated
    // repair bait: the firmware's unescaped error message, with anything inside
    {
      arbitrary: fc.tuple(id, weird).map(([i, m]) => `{"session_id":"s","type":"mcp","payload":{"jsonrpc":"2.0","id":${i},"error":{"message":"${m}"}}}`),
      weight: 1,
    },
    // sizes around the parse-boundary limit
    { arbitrary: fc.integer({ min: 1000, max: FRAME_MAX_BYTES + 4000 }).map((n) => `{"type":"listen","text":"${'é'.repeat(n / 2)}"}`), weight: 1 },
    // The links drop a connection past 64 KiB (their own, tested limit): frames here stay under it.
  )
  .filter((f) => Buffer.byteLength(f) < LINK_MAX_BYTES);

// ---------------------------------------------------------------- the run

describe('the gateway under generated hostile device frames', () => {
  let t: TestGateway;
  const devices: ReferenceDevice[] = [];
  let mac = 0;

  const join = (how: 'websocket' | 'mqtt'): Promise<ReferenceDevice> => {
    const d = new ReferenceDevice({ deviceId: `02:00:00:00:04:${(mac++).toString(16).padStart(2, '0')}` });
    devices.push(d);
    return joinDevice(t, d, how, 'fuzz');
  };

  beforeAll(async () => {
    // The attackers' frames unpaced: this run is about what each frame does at the parse boundary, not how many come
    // (the read budget's own tests pace floods: e2e/read-budget.test.ts).
    t = await startTestGateway({
      frames: { maxBytes: FRAME_MAX_BYTES, devicePerSecond: 1_000_000, deviceBurst: 1_000_000, addressPerSecond: 1_000_000, addressBurst: 1_000_000 },
    });
  });
  afterAll(async () => {
    for (const d of devices) d.terminate();
    await t.close();
  });

  it(
    `survives ${FRAMES} generated frames over WebSocket and MQTT while healthy devices answer every call`,
    { timeout: Math.max(120_000, FRAMES * 3) },
    async () => {
      const attackers = [await join('websocket'), await join('mqtt')];
      const healthy = [await join('websocket'), await join('mqtt')];

      // Healthy devices are called back to back for the whole run; every call must succeed.
      let fuzzing = true;
      const healthyCalls = { ok: 0, failed: [] as string[] };
      const callLoop = async (d: ReferenceDevice) => {
        for (let v = 0; fuzzing; v = (v + 1) % 100) {
          const r = await t.api('POST', `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: v } });
          if (r.status === 200 && d.volume === v) healthyCalls.ok++;
          else healthyCalls.failed.push(`${d.deviceId}: ${r.status} ${JSON.stringify(r.body)}`);
        }
      };
      const loops = healthy.map(callLoop);

      // Frames on one connection are handled in order: once the sentinel is answered, the batch was handled.
      let sentinels = 0;
      const handled = async (d: ReferenceDevice) => {
        const sentinel = `sentinel-${++sentinels}`;
        d.sendMcp({ jsonrpc: '2.0', id: sentinel, method: 'fuzz.sentinel' });
        await d.waitForMcp((p) => p['id'] === sentinel, 60_000);
      };

      let sent = 0;
      for (let batch = 0; sent < FRAMES; batch++) {
        const n = Math.min(BATCH, FRAMES - sent);
        const frames = fc.sample(frame, { numRuns: n, seed: SEED + batch });
        const attacker = attackers[batch % 2]!;
        // The simulator's records would grow with every frame: keep only this batch's.
        for (const list of [attacker.sent, attacker.rawReceived, attacker.received, attacker.mcpReceived, attacker.log]) list.length = 0;
        for (const f of frames) attacker.sendRaw(f);
        sent += n;
        await handled(attacker);
      }
      fuzzing = false;
      await Promise.all(loops);

      expect(healthyCalls.failed).toEqual([]);
      expect(healthyCalls.ok).toBeGreaterThan(0);
      expect(await t.metric('voxgate_frame_handler_errors_total')).toBe(0);
      // The run reached past the boundary too: every rejection reason, repairs, late replies, accepted MCP frames.
      for (const reason of ['too_deep', 'too_large', 'not_json', 'bad_envelope', 'bad_jsonrpc', 'repaired']) {
        expect(await t.metric('voxgate_frames_rejected_total', { reason })).toBeGreaterThan(0);
      }
      expect(await t.metric('voxgate_late_replies_total')).toBeGreaterThan(0);
      expect(await t.metric('voxgate_frames_received_total', { kind: 'mcp' })).toBeGreaterThan(FRAMES / 10);
      // The attackers are still connected and still answer calls of their own.
      for (const d of attackers) {
        expect(d.connected).toBe(true);
        const r = await t.api('POST', `/v1/devices/${d.deviceId}/tools/self.get_device_status/call`, { arguments: {} });
        expect([200, 404, 422, 502]).toContain(r.status);
      }
    },
  );
});
