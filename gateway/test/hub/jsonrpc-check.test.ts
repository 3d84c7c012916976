import { deserializeMessage } from '@modelcontextprotocol/client';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadClientSdk } from '../../src/hub/client-sdk.js';
import { readMessage } from '../../src/hub/stdio-transport.js';
import { identical } from '../../../test/support/identical.js';

/**
 * A stdio server's line read by hand (jsonrpc-check.ts) gives what the SDK's `deserializeMessage` gives: the same
 * value (own keys in the same order, prototypes), or an error where it throws. Compared on generated valid and
 * hostile envelopes, and on any JSON.
 */
const runs = { numRuns: 3000 };

const outcome = (f: () => unknown): { ok: true; value: unknown } | { ok: false } => {
  try {
    return { ok: true, value: f() };
  } catch {
    return { ok: false };
  }
};

/** How many compared lines were results the hand check answers (a result without `_meta`). */
let fastAnswers = 0;

/** Both accept with the same value, or both refuse. */
function agrees(text: string): void {
  const sdk = outcome(() => deserializeMessage(text));
  if (sdk.ok && 'result' in (sdk.value as object) && !Object.hasOwn((sdk.value as { result: object }).result, '_meta')) fastAnswers++;
  const mine = outcome(() => readMessage(text));
  expect(mine.ok).toBe(sdk.ok);
  if (mine.ok && sdk.ok) {
    if (!identical(mine.value, sdk.value)) expect(mine.value).toStrictEqual(sdk.value);
    expect(JSON.stringify(mine.value)).toBe(JSON.stringify(sdk.value));
  }
}

const anyId = fc.oneof(
  fc.string({ maxLength: 8 }),
  fc.integer(),
  fc.constantFrom(2 ** 53, -(2 ** 53) - 2, 1.5, -0, 1e300),
  fc.constantFrom(null, true, [], {}),
);
const key = fc.oneof(fc.constantFrom('jsonrpc', 'id', 'method', 'params', 'result', 'error', '_meta', 'extra', 'constructor', ''), fc.string({ maxLength: 6 }));
const small = fc.jsonValue({ maxDepth: 2 });
const meta = fc.oneof(
  fc.constant(undefined),
  small,
  fc.record({ progressToken: fc.oneof(anyId, fc.constant(undefined)) }, { requiredKeys: [] }),
  fc.record({ 'io.modelcontextprotocol/related-task': fc.oneof(fc.record({ taskId: fc.oneof(fc.string(), fc.integer()) }), small) }),
  fc.dictionary(key, small, { maxKeys: 3 }),
);
const params = fc.oneof(
  fc.constant(undefined),
  small,
  fc.record({ _meta: meta, name: fc.string({ maxLength: 5 }) }, { requiredKeys: [] }),
  fc.dictionary(key, small, { maxKeys: 3 }),
);
const error = fc.oneof(
  small,
  fc.record(
    { code: fc.oneof(fc.integer(), fc.constantFrom(1.5, '1', 2 ** 60)), message: fc.oneof(fc.string(), fc.integer()), data: small, more: small },
    { requiredKeys: [] },
  ),
);
const jsonrpc = fc.oneof(fc.constant('2.0'), fc.constant('2.0'), fc.constant('1.0'), fc.constant(undefined));

/** An envelope of any kind, its keys in any order, sometimes with a key too many or one missing. */
const envelope = fc
  .record(
    {
      jsonrpc,
      id: fc.oneof(anyId, fc.constant(undefined)),
      method: fc.oneof(fc.string({ maxLength: 12 }), fc.constant(undefined), fc.integer()),
      params,
      result: fc.oneof(fc.constant(undefined), small, fc.dictionary(key, small, { maxKeys: 4 })),
      error: fc.oneof(fc.constant(undefined), error),
      extra: fc.oneof(fc.constant(undefined), fc.constant(undefined), fc.constant(undefined), small),
    },
    { requiredKeys: [] },
  )
  .chain((r) =>
    fc.shuffledSubarray(Object.entries(r), { minLength: Object.keys(r).length }).map((entries) => {
      const o: Record<string, unknown> = {};
      for (const [k, v] of entries) if (v !== undefined) o[k] = v;
      return JSON.stringify(o);
    }),
  );

/** A result response, mostly valid: any id an answer may carry, any result keys, its keys in any order. */
const resultLine = fc
  .record({
    id: fc.oneof(fc.string({ maxLength: 8 }), fc.integer(), fc.constantFrom(2 ** 53, 1.5, null)),
    result: fc.oneof(fc.dictionary(key, small, { maxKeys: 4 }), fc.record({ content: small, isError: fc.boolean(), _meta: small }, { requiredKeys: [] })),
    more: fc.oneof(fc.constant(undefined), fc.constant(undefined), fc.constant(undefined), small),
    order: fc.constantFrom<string[]>(['jsonrpc', 'id', 'result'], ['result', 'jsonrpc', 'id'], ['id', 'result', 'jsonrpc']),
  })
  .map(({ id, result, more, order }) => {
    const all: Record<string, unknown> = { jsonrpc: '2.0', id, result };
    const o: Record<string, unknown> = {};
    for (const k of order) o[k] = all[k];
    if (more !== undefined) o['more'] = more;
    return JSON.stringify(o);
  });

describe('readMessage (a stdio server line)', () => {
  beforeAll(() => loadClientSdk());

  it("agrees with the SDK's deserializeMessage on generated envelopes", () => {
    fastAnswers = 0;
    fc.assert(fc.property(envelope, agrees), runs);
    fc.assert(fc.property(resultLine, agrees), runs);
    // The generators reach the hand-checked shape (most result lines), not only the fallback.
    expect(fastAnswers).toBeGreaterThan(100);
  });

  it("agrees with the SDK's deserializeMessage on any JSON and on text that is not JSON", () => {
    fc.assert(
      fc.property(
        fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v) ?? 'null'),
        agrees,
      ),
      { numRuns: 1000 },
    );
    fc.assert(fc.property(fc.string({ maxLength: 30 }), agrees), { numRuns: 500 });
  });

  it('agrees on the everyday messages and on named hostile ones', () => {
    for (const text of [
      '{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"Echo: hi"}]}}',
      '{"result":{"content":[]},"jsonrpc":"2.0","id":"a"}',
      '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":3,"progress":1,"total":2}}',
      '{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5,"_meta":{"progressToken":"t"}}}',
      '{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found","data":{"x":1},"extra":true}}',
      '{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"}}',
      '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}',
      '{"jsonrpc":"2.0","id":1,"result":{"__proto__":{"isError":true},"content":[]}}',
      '{"jsonrpc":"2.0","id":1,"result":{"constructor":{"prototype":{}},"content":[]}}',
      '{"jsonrpc":"2.0","id":9007199254740993,"result":{}}',
      '{"jsonrpc":"2.0","id":1,"result":[]}',
      '{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}',
      '{"jsonrpc":"2.0","id":1,"method":"x","params":{"_meta":{"progressToken":1.5}}}',
      '{"jsonrpc":"2.0","id":1,"method":"x","params":[]}',
      '[{"jsonrpc":"2.0","id":1,"result":{}}]',
      '',
      '{',
    ])
      agrees(text);
  });
});
