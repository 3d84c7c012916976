import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BoundedLineReader, idOfTruncated, type Line } from '../../src/hub/line-reader.js';

const b = (s: string) => Buffer.from(s, 'utf8');

describe('BoundedLineReader', () => {
  it('splits newline-delimited messages, across chunks, and drops a trailing CR', () => {
    const r = new BoundedLineReader(1024);
    expect(r.push(b('{"a":1}\n{"b"'))).toEqual([{ kind: 'line', text: '{"a":1}' }]);
    expect(r.push(b(':2}\r\n'))).toEqual([{ kind: 'line', text: '{"b":2}' }]);
    expect(r.push(b('no newline yet'))).toEqual([]);
  });

  it('keeps a multi-byte character split between chunks whole', () => {
    const r = new BoundedLineReader(1024);
    const all = b('"é"\n');
    expect(r.push(all.subarray(0, 2))).toEqual([]);
    expect(r.push(all.subarray(2))).toEqual([{ kind: 'line', text: '"é"' }]);
  });

  it('skips a line over the bound up to its newline, keeping its size, head and tail, and reads the next line', () => {
    const r = new BoundedLineReader(16);
    const big = `{"id":7,"x":"${'y'.repeat(2000)}"}`;
    const out = [...r.push(b(big.slice(0, 1000))), ...r.push(b(`${big.slice(1000)}\n{"ok":1}\n`))];
    expect(out).toHaveLength(2);
    const skipped = out[0]!;
    expect(skipped.kind).toBe('oversized');
    if (skipped.kind !== 'oversized') return;
    expect(skipped.bytes).toBe(big.length);
    expect(skipped.head.startsWith('{"id":7,')).toBe(true);
    expect(skipped.head.length).toBe(512);
    expect(skipped.tail.endsWith('yy"}')).toBe(true);
    expect(skipped.tail.length).toBe(512);
    expect(out[1]).toEqual({ kind: 'line', text: '{"ok":1}' });
  });

  it('takes a line of exactly the bound, and forgets a partial line on clear', () => {
    const r = new BoundedLineReader(4);
    expect(r.push(b('abcd\n'))).toEqual([{ kind: 'line', text: 'abcd' }]);
    r.push(b('abc'));
    r.clear();
    expect(r.push(b('z\n'))).toEqual([{ kind: 'line', text: 'z' }]);
  });
});

describe('idOfTruncated', () => {
  it('finds the id at the start or the end of a message', () => {
    expect(idOfTruncated('{"jsonrpc":"2.0","id":42,"result":{', '')).toBe(42);
    expect(idOfTruncated('{"id":"abc","result"', '')).toBe('abc');
    expect(idOfTruncated('{"result":{"x":', '"}},"jsonrpc":"2.0","id":-3}\r')).toBe(-3);
  });

  it('finds nothing when the id is in the middle, malformed or absurdly long', () => {
    expect(idOfTruncated('{"result":{"id":5,', 'x"}}')).toBeUndefined();
    expect(idOfTruncated('{"id":1e5,', '')).toBeUndefined();
    expect(idOfTruncated(`{"id":${'1'.repeat(20)},`, '')).toBeUndefined();
    expect(idOfTruncated('', '')).toBeUndefined();
  });
});

describe('BoundedLineReader and idOfTruncated (from the e2e hub-limits tests)', () => {
  it('skips an over-long line up to its newline and keeps reading the next ones', () => {
    const r = new BoundedLineReader(16);
    const out = [
      ...r.push(Buffer.from('{"a":1}\n{"jsonrpc":"2.0","id":7,"result":"')),
      ...r.push(Buffer.from('y'.repeat(100))),
      ...r.push(Buffer.from('"}\n{"b":2}\r\n{"c"')),
    ];
    expect(out[0]).toEqual({ kind: 'line', text: '{"a":1}' });
    expect(out[1]).toMatchObject({ kind: 'oversized', bytes: 136 });
    expect(out[2]).toEqual({ kind: 'line', text: '{"b":2}' });
    expect(out).toHaveLength(3);
    expect(r.push(Buffer.from(':3}\n'))).toEqual([{ kind: 'line', text: '{"c":3}' }]);
  });

  it('finds the id at the start (jsonrpc, id first) or at the end (the TypeScript SDK order)', () => {
    expect(idOfTruncated('{"jsonrpc":"2.0","id":7,"result":{"content"', 'xx"}]}}')).toBe(7);
    expect(idOfTruncated('{"result":{"content":[{"type":"text","text":"', 'xxx"}]},"jsonrpc":"2.0","id":"a-1"}')).toBe('a-1');
    // an "id" inside the result is not the message's id
    expect(idOfTruncated('{"result":{"content":[{"type":"text","text":"', '"id":3}}')).toBeUndefined();
  });
});

describe('BoundedLineReader on any chunking', () => {
  it('gives the lines a plain split gives (short lines whole, long ones skipped with their size), however the bytes are cut', () => {
    const max = 16;
    const line = fc.oneof(fc.string({ maxLength: 12 }), fc.string({ minLength: 10, maxLength: 30 }), fc.constant('é€\r'));
    fc.assert(
      fc.property(fc.array(line, { maxLength: 8 }), fc.array(fc.nat(), { maxLength: 6 }), (lines, cuts) => {
        const bytes = Buffer.from(lines.map((l) => `${l}\n`).join(''));
        const at = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
        const reader = new BoundedLineReader(max);
        const got: Line[] = [];
        let from = 0;
        for (const c of [...at, bytes.length]) {
          got.push(...reader.push(bytes.subarray(from, c)));
          from = c;
        }
        const want = lines.map((l) => {
          const size = Buffer.byteLength(l);
          return size <= max ? l.replace(/\r$/, '') : size;
        });
        expect(got.map((g) => (g.kind === 'line' ? g.text : g.bytes))).toEqual(want);
      }),
      { numRuns: 2000 },
    );
  });
});
