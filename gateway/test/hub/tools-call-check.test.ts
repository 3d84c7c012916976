import { Client } from '@modelcontextprotocol/client';
import { McpServer } from '@modelcontextprotocol/server';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fastCallToolRequest, fastCallToolResult, speedUpToolsCall, wireCodecOf, type ToolsCallCodec } from '../../src/hub/tools-call-check.js';
import { identical } from '../../../test/support/identical.js';

/**
 * The hand-written tools/call checks answer only where the SDK's zod schemas would accept, and with the value
 * the schema outputs (the same keys in the same order, prototypes included): compared on valid and hostile input
 * against both the client's and the server's codec (each bundles its own copy of the schemas).
 */
const runs = { numRuns: 2000 };
const clientCodec = wireCodecOf(new Client({ name: 't', version: '1' })) as ToolsCallCodec;
const serverCodec = wireCodecOf(new McpServer({ name: 't', version: '1' }).server) as ToolsCallCodec;
// The SDK's own checks, kept before any fast path is put in front of them.
const sdk = [clientCodec, serverCodec].map((c) => ({ request: c.validateRequest, result: c.validateResult }));

function same(a: unknown, b: unknown): void {
  if (!identical(a, b)) expect(a).toStrictEqual(b); // shows the difference
  expect(JSON.stringify(a)).toBe(JSON.stringify(b));
}

/** Where the fast path answers, every SDK codec accepts with the same value. Returns whether it answered. */
function agreesOnResult(v: unknown): boolean {
  const fast = fastCallToolResult(v);
  for (const s of sdk) {
    const zod = s.result('tools/call', v);
    if (fast !== undefined) {
      expect(zod.ok).toBe(true);
      if (zod.ok) same(fast, zod.value);
    }
  }
  return fast !== undefined;
}
function agreesOnRequest(v: unknown): boolean {
  const fast = fastCallToolRequest(v);
  for (const s of sdk) {
    const zod = s.request('tools/call', v);
    if (fast !== undefined) {
      expect(zod.ok).toBe(true);
      if (zod.ok) same(fast, zod.value);
    }
  }
  return fast !== undefined;
}

const hostileKey = fc.constantFrom('__proto__', 'constructor', 'toString', 'progressToken', 'io.modelcontextprotocol/related-task', '', 'type');
const key = fc.oneof(fc.string({ maxLength: 8 }), hostileKey);
const anyValue = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }),
  fc.constant(undefined),
  fc.constantFrom(Number.NaN, Infinity, 2 ** 53, -0, 1.5),
  fc.dictionary(key, fc.jsonValue({ maxDepth: 1 }), { maxKeys: 4 }),
);
/** Mostly valid, sometimes hostile: the comparison must reach the fast path often. */
const mostly = <T, U>(valid: fc.Arbitrary<T>, other: fc.Arbitrary<U>) => fc.oneof({ arbitrary: valid, weight: 6 }, { arbitrary: other, weight: 1 });
const record = mostly(
  fc.dictionary(fc.oneof({ arbitrary: fc.string({ maxLength: 8 }), weight: 8 }, { arbitrary: hostileKey, weight: 1 }), fc.jsonValue({ maxDepth: 1 }), {
    maxKeys: 5,
  }),
  anyValue,
);
const meta = mostly(
  fc.record({ progressToken: mostly(fc.oneof(fc.string(), fc.integer()), anyValue), x: fc.jsonValue({ maxDepth: 1 }) }, { requiredKeys: [] }),
  fc.oneof(fc.dictionary(key, anyValue, { maxKeys: 4 }), anyValue),
);
const textBlock = fc.record(
  {
    type: mostly(fc.constant('text'), fc.oneof(fc.constantFrom('image', 'audio', 'resource', 'resource_link', 'TEXT'), anyValue)),
    text: mostly(fc.string(), anyValue),
    _meta: record,
    annotations: fc.oneof(fc.record({ priority: fc.double(), audience: fc.constant(['user']) }, { requiredKeys: [] }), anyValue),
    extra: anyValue,
  },
  { requiredKeys: ['type', 'text'] },
);
/** A text block with its usual keys only, most of the time. */
const block = mostly(fc.record({ type: fc.constant('text'), text: fc.string(), _meta: record }, { requiredKeys: ['type', 'text'] }), textBlock);
const otherBlock = fc.oneof(
  fc.record({ type: fc.constant('image'), data: fc.constantFrom('aGVsbG8=', '%%%'), mimeType: fc.constant('image/png') }),
  fc.record({ type: fc.constant('resource'), resource: fc.record({ uri: fc.constant('file:///x'), text: fc.string() }) }),
  anyValue,
);
const content = mostly(fc.array(block, { maxLength: 4 }), fc.oneof(fc.array(fc.oneof(textBlock, otherBlock), { maxLength: 3 }), anyValue));
const result = fc.record(
  { content, structuredContent: record, isError: mostly(fc.boolean(), anyValue), _meta: meta, extra: anyValue, toolResult: anyValue },
  { requiredKeys: ['content'] },
);
/** Keys in any order (zod's output order is its shape's, whatever the input's). */
const shuffled = <T extends object>(arb: fc.Arbitrary<T>) =>
  fc.tuple(arb, fc.infiniteStream(fc.integer())).map(([o, rnd]) => {
    const entries = Object.entries(o);
    const it = rnd[Symbol.iterator]();
    entries.sort(() => (it.next().value as number) % 3);
    return Object.fromEntries(entries) as T;
  });

describe('fastCallToolResult', () => {
  it('answers only where the SDK accepts, with the SDK schema value (valid and hostile results)', () => {
    let answered = 0;
    fc.assert(
      fc.property(shuffled(result), (v) => {
        if (agreesOnResult(v)) answered++;
      }),
      runs,
    );
    // The generator reaches the fast path often enough for the comparison to mean something (about 100-165 of
    // 2 000 runs answered by it, seed by seed: the floor is far below that spread, so no seed fails it).
    expect(answered).toBeGreaterThan(30);
  });

  it('answers for what tools send every day', () => {
    const everyday = [
      { content: [{ type: 'text', text: 'Echo: hello' }] },
      { content: [], isError: true },
      { content: [{ type: 'text', text: '{"a":1}' }], structuredContent: { a: 1 } },
      { content: [{ type: 'text', text: 'x', _meta: { k: 1 } }], _meta: { progressToken: 4, other: 'y' }, extra: [1] },
    ];
    for (const v of everyday) expect(agreesOnResult(v)).toBe(true);
  });

  it('leaves every hostile or unusual shape to the SDK', () => {
    const hostile = [
      null,
      'x',
      [],
      {},
      { content: 'x' },
      { content: [null] },
      { content: [{ type: 'text' }] },
      { content: [{ type: 'text', text: 1 }] },
      { content: [{ type: 'image', data: 'aGVsbG8=', mimeType: 'image/png' }] },
      { content: [{ type: 'text', text: 'a', annotations: { priority: 2 } }] },
      { content: [], structuredContent: [] },
      { content: [], isError: 'yes' },
      { content: [], _meta: { progressToken: 1.5 } },
      { content: [], _meta: { 'io.modelcontextprotocol/related-task': { taskId: 1 } } },
      JSON.parse('{"content":[],"structuredContent":{"__proto__":{"polluted":1},"a":1}}') as unknown,
      JSON.parse('{"content":[],"__proto__":{"polluted":1}}') as unknown,
      JSON.parse('{"content":[{"type":"text","text":"a","_meta":{"__proto__":{"polluted":1}}}]}') as unknown,
      Object.assign(Object.create(null) as object, { content: [] }),
      new (class Result {
        content = [];
      })(),
    ];
    for (const v of hostile) expect(agreesOnResult(v)).toBe(false);
    expect(({} as { polluted?: number }).polluted).toBeUndefined();
  });
});

describe('fastCallToolRequest', () => {
  const params = mostly(
    fc.record({ name: fc.string(), arguments: record, _meta: meta }, { requiredKeys: ['name'] }),
    fc.record(
      { name: mostly(fc.string(), anyValue), arguments: record, _meta: meta, task: fc.oneof(fc.record({ ttl: fc.integer() }), anyValue), extra: anyValue },
      { requiredKeys: [] },
    ),
  );
  const request = fc.record(
    {
      jsonrpc: fc.constant('2.0'),
      id: fc.oneof(fc.integer(), fc.string()),
      method: mostly(fc.constant('tools/call'), fc.string()),
      params: mostly(params, anyValue),
    },
    { requiredKeys: ['method'] },
  );

  it('answers only where the SDK accepts, with the SDK schema value (valid and hostile requests)', () => {
    let answered = 0;
    fc.assert(
      fc.property(shuffled(request), (v) => {
        if (agreesOnRequest(v)) answered++;
      }),
      runs,
    );
    expect(answered).toBeGreaterThan(30); // as above (about 130-165 of 2 000)
  });

  it('answers for an ordinary call and leaves the rest to the SDK', () => {
    expect(agreesOnRequest({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'echo', arguments: { message: 'hi' } } })).toBe(true);
    expect(agreesOnRequest({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { _meta: { progressToken: 'p' }, name: 'echo' } })).toBe(true);
    for (const v of [
      { method: 'tools/call' },
      { method: 'tools/call', params: { name: 1 } },
      { method: 'tools/call', params: { name: 'x', arguments: [] } },
      { method: 'tools/call', params: { name: 'x', task: { ttl: 1 } } },
      { method: 'tools/call', params: { name: 'x', _meta: { progressToken: null } } },
      { method: 'tools/list', params: { name: 'x' } },
      JSON.parse('{"method":"tools/call","params":{"name":"x","arguments":{"__proto__":{"polluted":1}}}}') as unknown,
    ])
      expect(agreesOnRequest(v)).toBe(false);
  });
});

describe('speedUpToolsCall', () => {
  it('wraps a 2025-11-25 codec once; other methods and refusals still get the SDK answer and message', () => {
    const codec = { era: '2025-11-25', validateRequest: sdk[0]!.request, validateResult: sdk[0]!.result };
    expect(speedUpToolsCall(codec)).toBe(true);
    const wrapped = codec.validateResult;
    expect(speedUpToolsCall(codec)).toBe(true);
    expect(codec.validateResult).toBe(wrapped);
    const bad = { content: [{ type: 'image', data: '%%%', mimeType: 'image/png' }] };
    expect(codec.validateResult('tools/call', bad)).toStrictEqual(sdk[0]!.result('tools/call', bad));
    expect(codec.validateResult('tools/list', { tools: [] })).toStrictEqual(sdk[0]!.result('tools/list', { tools: [] }));
    // The era probe (a result of undefined) gets the SDK's own answer, kept per method.
    const probe = codec.validateResult('tools/call', undefined);
    expect(probe).toStrictEqual(sdk[0]!.result('tools/call', undefined));
    expect(probe.ok).toBe(false);
    expect(codec.validateResult('tools/call', undefined)).toBe(probe);
    expect(codec.validateResult('no/such-method', undefined)).toStrictEqual(sdk[0]!.result('no/such-method', undefined));
    const req = { method: 'tools/call', params: { name: 'x', task: { ttl: 'soon' } } };
    expect(codec.validateRequest('tools/call', req)).toStrictEqual(sdk[0]!.request('tools/call', req));
  });

  it('leaves a codec of another era, or one it does not recognise, alone', () => {
    const modern = { era: '2026-07-28', validateRequest: sdk[0]!.request, validateResult: sdk[0]!.result };
    expect(speedUpToolsCall(modern)).toBe(false);
    expect(modern.validateResult).toBe(sdk[0]!.result);
    expect(speedUpToolsCall({ era: '2025-11-25' })).toBe(false);
    expect(speedUpToolsCall(undefined)).toBe(false);
    expect(wireCodecOf({})).toBeUndefined();
  });
});
