import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { guardSchema, guardToolSchemas, MAX_EXPANDED_NODES, MAX_REF_CHAIN } from '../../src/schemas/untrusted-schema.js';
import { SchemaValidators } from '../../src/schemas/validators.js';
import { startTestGateway } from '../../../test/support/gateway-harness.js';
import { nodeServer } from '../../../test/support/hub.js';
import { ReferenceDevice, referenceTools } from '../../../test/support/reference-device.js';
import { ScriptedWsDevice } from '../../../test/support/scripted-device.js';

const limits = { maxBytes: 64 * 1024, maxDepth: 32 };
const evil = { type: 'object', properties: { s: { type: 'string', pattern: '^(a|a)*$' } } };
/** ajv's own registry of compiled schemas: what grew without bound before (issue 8, defect 5). */
const ajvHeld = (v: SchemaValidators) => (v as unknown as { ajv: { _cache: Map<unknown, unknown> } }).ajv._cache.size;

/**
 * `links` definitions, each naming the next twice in place: ~2 KB at 28 links, 2^links values to walk in a validation
 * (the red team's schema: 28 links held the event loop for 4 s).
 */
function doublingChain(links: number): Record<string, unknown> {
  const $defs: Record<string, unknown> = { [`a${links}`]: { type: 'string', minLength: 1 } };
  for (let i = 0; i < links; i++) $defs[`a${i}`] = { allOf: [{ $ref: `#/$defs/a${i + 1}` }, { $ref: `#/$defs/a${i + 1}` }] };
  return { type: 'object', $defs, properties: { x: { $ref: '#/$defs/a0' } } };
}

describe('untrusted schemas: bounds and sanitizing', () => {
  it('refuses schemas over the depth or size bound, without recursion limits of its own', () => {
    let deep: Record<string, unknown> = { type: 'string' };
    for (let i = 0; i < 100_000; i++) deep = { not: deep };
    expect(guardSchema(deep, limits)).toMatchObject({ ok: false, reason: 'too_deep' });
    expect(guardSchema({ type: 'object', description: 'x'.repeat(70_000) }, limits)).toMatchObject({ ok: false, reason: 'too_large' });
    expect(guardSchema(evil, limits)).toEqual({ ok: true, schema: evil });
  });

  it('refuses a schema whose $refs multiply the work of a validation, however small its bytes', () => {
    const bomb = doublingChain(28);
    expect(JSON.stringify(bomb).length).toBeLessThan(limits.maxBytes);
    expect(guardSchema(bomb, limits)).toMatchObject({ ok: false, reason: 'too_complex' });
    // A link is four values (the definition, its allOf, two $refs) and twice the next, counted where each definition
    // stands and where it is used: ~18 × 2^links values.
    expect(18 * 2 ** 10).toBeLessThan(MAX_EXPANDED_NODES);
    expect(guardSchema(doublingChain(10), limits)).toMatchObject({ ok: true });
    expect(18 * 2 ** 11).toBeGreaterThan(MAX_EXPANDED_NODES);
    expect(guardSchema(doublingChain(11), limits)).toMatchObject({ ok: false, reason: 'too_complex' });
    // A chain of references nested deeper than the bound, each used once.
    const $defs: Record<string, unknown> = { [`c${MAX_REF_CHAIN + 1}`]: { type: 'string' } };
    for (let i = 0; i <= MAX_REF_CHAIN; i++) $defs[`c${i}`] = { $ref: `#/$defs/c${i + 1}` };
    expect(guardSchema({ $defs, properties: { x: { $ref: '#/$defs/c0' } } }, limits)).toMatchObject({ ok: false, reason: 'too_complex' });
  });

  it('refuses a $ref cycle that applies to the same value again (unbounded recursion), keeps recursive types', () => {
    const v = new SchemaValidators({ limits, maxCached: 8 });
    for (const loop of [
      { $defs: { a: { allOf: [{ $ref: '#/$defs/a' }] } }, properties: { x: { $ref: '#/$defs/a' } } },
      { $defs: { a: { anyOf: [{ $ref: '#/$defs/b' }] }, b: { not: { $ref: '#/$defs/a' } } }, properties: { x: { $ref: '#/$defs/a' } } },
      { properties: { x: { type: 'string' } }, if: { $ref: '#' } },
    ]) {
      expect(guardSchema(loop, limits)).toMatchObject({ ok: false, reason: 'too_complex' });
      expect(v.validatorFor(loop)).toEqual({ error: expect.stringMatching(/schema refused: a \$ref cycle/) as unknown });
    }
    // A tree: the cycle goes through a part of the value, so it ends with the value's own depth.
    const tree = {
      type: 'object',
      $defs: {
        node: { type: 'object', properties: { label: { type: 'string' }, children: { type: 'array', items: { $ref: '#/$defs/node' } } }, required: ['label'] },
      },
      properties: { root: { $ref: '#/$defs/node' }, copy: { allOf: [{ $ref: '#/$defs/node' }] } },
    };
    expect(guardSchema(tree, limits)).toMatchObject({ ok: true });
    expect(guardSchema({ type: 'object', properties: { next: { $ref: '#' } } }, limits)).toMatchObject({ ok: true });
    expect(v.check(tree, { root: { label: 'a', children: [{ label: 'b', children: [] }] } })).toBeUndefined();
    expect(v.check(tree, { root: { label: 'a', children: [{ children: [] }] } })?.[0]?.argument).toBe('root.children.0.label');
    // A definition shared by many properties is counted at each use, and a real schema's sharing stays far under the bound.
    const shared = {
      $defs: { addr: { type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
      properties: {} as Record<string, unknown>,
    };
    for (let i = 0; i < 200; i++) shared.properties[`p${i}`] = { $ref: '#/$defs/addr' };
    expect(guardSchema(shared, limits)).toMatchObject({ ok: true });
  });

  it('drops the keywords that register names in the shared validator, keeps properties of those names', () => {
    const raw = JSON.parse(
      '{"$id":"urn:x","$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"$id":{"type":"string","$anchor":"a"},"__proto__":{"type":"integer"}},"default":{"$id":"data"}}',
    ) as Record<string, unknown>;
    const r = guardSchema(raw, limits);
    if (!r.ok) throw new Error(r.detail);
    expect(JSON.stringify(r.schema)).toBe('{"type":"object","properties":{"$id":{"type":"string"},"__proto__":{"type":"integer"}},"default":{"$id":"data"}}');
    expect(Object.getPrototypeOf(r.schema['properties'])).toBe(Object.prototype);
  });

  it("serves a tool's root $schema (its dialect) and drops it everywhere else and from what the validators compile", () => {
    const dialect = 'https://json-schema.org/draft/2020-12/schema';
    const input = { $schema: dialect, $id: 'urn:x', type: 'object', properties: { a: { $schema: dialect, type: 'string' } } };
    const output = { $schema: dialect, type: 'object' };
    const r = guardToolSchemas(input, output, limits);
    if (!r.ok) throw new Error(r.detail);
    expect(JSON.stringify(r.inputSchema)).toBe(`{"$schema":"${dialect}","type":"object","properties":{"a":{"type":"string"}}}`);
    expect(r.outputSchema).toEqual(output);
    // Not a dialect's URI: a non-string, or a string longer than any dialect's, is dropped as before.
    for (const odd of [
      { type: 'object', $schema: { $id: 'urn:y' } },
      { type: 'object', $schema: 'x'.repeat(300) },
    ]) {
      const o = guardToolSchemas(odd, undefined, limits);
      expect(o.ok && o.inputSchema).toEqual({ type: 'object' });
    }
    // The 2020-12 dialect is not one ajv knows by that URI: compiled without it, the schema validates.
    const v = new SchemaValidators({ limits, maxCached: 4 });
    expect('validate' in v.validatorFor(r.inputSchema)).toBe(true);
    expect(v.check(r.inputSchema, { a: 1 })?.[0]?.argument).toBe('a');
  });
});

describe('SchemaValidators (issue 8, defects 4 and 5)', () => {
  it('runs a schema pattern on a linear-time engine: the catastrophic case is decided at once', () => {
    const v = new SchemaValidators({ limits, maxCached: 16 });
    expect(v.check(evil, { s: 'aaaa' })).toBeUndefined();
    expect(v.check(evil, { s: `${'a'.repeat(27)}b` })).toEqual([{ argument: 's', message: 'must match pattern "^(a|a)*$"' }]);
    // 2^10000 paths for a backtracking engine; one linear pass for RE2.
    expect(v.check(evil, { s: `${'a'.repeat(10_000)}b` })?.[0]?.argument).toBe('s');
  });

  it('stops at the first problem: the errors of one validation do not grow with the value', () => {
    const v = new SchemaValidators({ limits, maxCached: 4 });
    const schema = { type: 'object', properties: { list: { type: 'array', items: { type: 'integer' } } } };
    const compiled = v.validatorFor(schema);
    if (!('validate' in compiled)) throw new Error(compiled.error);
    expect(compiled.validate({ list: Array.from({ length: 100_000 }, () => 'x') })).toBe(false);
    expect(compiled.validate.errors).toHaveLength(1);
    expect(v.check(schema, { list: [1, 'a', 'b'] })).toEqual([{ argument: 'list.1', message: 'must be integer' }]);
  });

  it('does not enforce a pattern RE2 cannot run, and says so', () => {
    const reasons: string[] = [];
    const v = new SchemaValidators({ limits, maxCached: 16, onUnenforcedPattern: (r) => reasons.push(r) });
    const schema = { type: 'object', properties: { s: { type: 'string', pattern: '^(a)\\1$', maxLength: 3 } } };
    expect(v.check(schema, { s: 'ab' })).toBeUndefined();
    expect(v.check(schema, { s: 'abcd' })?.[0]?.argument).toBe('s'); // the rest of the schema still holds
    expect(v.check({ properties: { s: { pattern: 'a{200}b{200}' } } }, { s: 'x' })).toBeUndefined();
    expect(reasons).toEqual(['unsupported', 'too_many_repeats']);
  });

  it('caches by content, bounded: identical schemas share one validator, many schemas stay at the bound', () => {
    const v = new SchemaValidators({ limits, maxCached: 8 });
    const base = ajvHeld(v);
    const a = v.validatorFor({ type: 'object', properties: { x: { type: 'integer' } } });
    const b = v.validatorFor({ type: 'object', properties: { x: { type: 'integer' } } });
    expect('validate' in a && 'validate' in b && a.validate === b.validate).toBe(true);
    expect(v.size).toBe(1);
    for (let i = 0; i < 500; i++) v.check({ type: 'object', properties: { x: { type: 'integer', maximum: i } } }, { x: 1 });
    expect(v.size).toBe(8);
    expect(ajvHeld(v) - base).toBeLessThanOrEqual(8);
  });

  it('keeps each schema to itself: no $id registered for another schema to reach or collide with', () => {
    const v = new SchemaValidators({ limits, maxCached: 16 });
    const first = { type: 'object', properties: { p: { $id: 'urn:shared', type: 'integer' } } };
    const second = { type: 'object', properties: { p: { $id: 'urn:shared', type: 'string' } } };
    expect('validate' in v.validatorFor(first)).toBe(true);
    expect('validate' in v.validatorFor(second)).toBe(true); // no "resolves to more than one schema"
    expect(v.check(second, { p: 'text' })).toBeUndefined();
    // A $ref to a name another schema declared does not resolve to it.
    expect(v.validatorFor({ type: 'object', properties: { q: { $ref: 'urn:shared' } } })).toMatchObject({ error: expect.stringContaining('does not compile') });
  });

  it('as the MCP client validator: a refused schema throws, a valid one validates', () => {
    const v = new SchemaValidators({ limits: { maxBytes: 1024, maxDepth: 8 }, maxCached: 4 });
    expect(() => v.getValidator({ type: 'object', description: 'x'.repeat(2000) })).toThrow(/schema refused/);
    const check = v.getValidator<{ n: number }>({ type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] });
    expect(check({ n: 1 }).valid).toBe(true);
    expect(check({}).errorMessage).toMatch(/required/);
  });
});

describe('untrusted schemas through the gateway', () => {
  it('a device pattern cannot block the gateway; an over-deep schema leaves its tool out', async () => {
    const t = await startTestGateway();
    let deep: Record<string, unknown> = { type: 'string' };
    // 41 levels: within the frame bound (64), over the schema bound (32).
    for (let i = 0; i < 20; i++) deep = { type: 'object', properties: { x: deep } };
    const scripted = '02:00:00:00:0e:01';
    const ready = t.nextEvent('device.ready', scripted);
    const device = await ScriptedWsDevice.connect(t.wsUrl, scripted, [
      { name: 'echo', inputSchema: evil },
      { name: 'nested', inputSchema: deep },
    ]);
    const healthy = new ReferenceDevice({ deviceId: '02:00:00:00:0e:02' });
    try {
      await ready;
      const healthyReady = t.nextEvent('device.ready', healthy.deviceId);
      await healthy.connectWebSocket(t.wsUrl);
      await healthyReady;

      const tools = await t.api<{ tools: Array<{ name: string }> }>('GET', `/v1/devices/${scripted}/tools`);
      expect(tools.body.tools.map((x) => x.name)).toEqual(['echo']);
      expect(await t.metric('voxgate_schemas_refused_total', { source: 'device', reason: 'too_deep' })).toBe(1);

      const call = (s: string) => t.api<{ code?: string; content?: unknown[] }>('POST', `/v1/devices/${scripted}/tools/echo/call`, { arguments: { s } });
      const refused = await call(`${'a'.repeat(27)}b`);
      expect(refused.status).toBe(422);
      expect(refused.body.code).toBe('INVALID_ARGUMENTS');
      expect((await call(`${'a'.repeat(5000)}b`)).body.code).toBe('INVALID_ARGUMENTS');
      expect((await call('aaaa')).status).toBe(200);
      const other = await t.api('POST', `/v1/devices/${healthy.deviceId}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: 12 } });
      expect(other.status).toBe(200);
      expect(healthy.volume).toBe(12);
    } finally {
      device.close();
      healthy.terminate();
      await t.close();
    }
  });

  it("a device's schema bomb leaves its tool out; the gateway and the device's other tools keep serving", async () => {
    const t = await startTestGateway();
    const scripted = '02:00:00:00:0e:03';
    const ready = t.nextEvent('device.ready', scripted);
    const device = await ScriptedWsDevice.connect(t.wsUrl, scripted, [
      { name: 'bomb', inputSchema: doublingChain(40) },
      { name: 'echo', inputSchema: evil },
    ]);
    try {
      await ready;
      const tools = await t.api<{ tools: Array<{ name: string }> }>('GET', `/v1/devices/${scripted}/tools`);
      expect(tools.body.tools.map((x) => x.name)).toEqual(['echo']);
      expect(await t.metric('voxgate_schemas_refused_total', { source: 'device', reason: 'too_complex' })).toBe(1);
      const bomb = await t.api<{ code?: string }>('POST', `/v1/devices/${scripted}/tools/bomb/call`, { arguments: { x: 'ok' } });
      expect(bomb.status).toBe(404);
      expect((await t.api('POST', `/v1/devices/${scripted}/tools/echo/call`, { arguments: { s: 'aa' } })).status).toBe(200);
    } finally {
      device.close();
      await t.close();
    }
  });

  it('devices share validators by schema content, and the cache stays at its configured bound', async () => {
    const t = await startTestGateway({ schemas: { validatorCacheSize: 3 } });
    const devices: ReferenceDevice[] = [];
    let n = 0;
    /** A device whose set_volume schema differs by its maximum (or not, for `max` 100). */
    const callOn = async (max: number) => {
      const tools = referenceTools().map((x) =>
        x.name === 'self.audio_speaker.set_volume' ? { ...x, properties: { volume: { type: 'integer' as const, minimum: 0, maximum: max } } } : x,
      );
      const d = new ReferenceDevice({ deviceId: `02:00:00:00:0f:${(n++).toString(16).padStart(2, '0')}`, tools });
      devices.push(d);
      const ready = t.nextEvent('device.ready', d.deviceId);
      await d.connectWebSocket(t.wsUrl);
      await ready;
      const r = await t.api('POST', `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: 1 } });
      expect(r.status).toBe(200);
      return t.metric('voxgate_schema_validators_cached');
    };
    try {
      expect(await callOn(100)).toBe(1);
      expect(await callOn(100)).toBe(1); // same catalog: the same validator
      expect(await callOn(99)).toBe(2);
      for (const max of [98, 97, 96, 95]) expect(await callOn(max)).toBe(3);
      // An evicted schema is compiled again when needed: still correct.
      const again = await t.api<{ code: string }>('POST', `/v1/devices/${devices[0]!.deviceId}/tools/self.audio_speaker.set_volume/call`, {
        arguments: { volume: 101 },
      });
      expect(again.body.code).toBe('INVALID_ARGUMENTS');
    } finally {
      for (const d of devices) d.terminate();
      await t.close();
    }
  });
});

describe('untrusted schemas from a hosted MCP server', () => {
  it('leaves out a tool whose schema is over the bounds; validates outputSchemas on the linear engine', async () => {
    const t = await startTestGateway({
      mcp: { servers: { hostile: nodeServer(fileURLToPath(new URL('../fixtures/hostile-schema-server.mjs', import.meta.url))) } },
    });
    try {
      await t.gw.hubStarted;
      const tools = await t.api<{ tools: Array<{ name: string }> }>('GET', '/v1/tools');
      const names = tools.body.tools.map((x) => x.name).filter((n) => n.startsWith('mcp__hostile__'));
      expect(names.sort()).toEqual(['mcp__hostile__fine', 'mcp__hostile__redos_out']);
      expect(t.logs.some((l) => l['msg'] === 'upstream tool schema over the bounds; tool left out' && l['tool'] === 'deep_in')).toBe(true);
      expect(await t.metric('voxgate_schemas_refused_total', { source: 'server', reason: 'too_deep' })).toBe(1);

      // 5000 a's and a b: decided in one pass, refused as not matching the declared outputSchema.
      const redos = await t.api<{ isError: boolean; content: Array<{ text: string }> }>('POST', '/v1/tools/mcp__hostile__redos_out/call', { arguments: {} });
      expect(redos.body.isError).toBe(true);
      expect(redos.body.content[0]?.text).toMatch(/does not match the tool's output schema: data\/s must match pattern/);
      const fine = await t.api<{ structuredContent?: unknown }>('POST', '/v1/tools/mcp__hostile__fine/call', { arguments: {} });
      expect(fine.status).toBe(200);
      expect(fine.body.structuredContent).toEqual({ n: 1 });
    } finally {
      await t.close();
    }
  });
});
