import { describe, expect, it } from 'vitest';
import { int32Problems } from '../../src/devices/int32.js';

const schema = { type: 'object', properties: { value: { type: 'integer' }, ratio: { type: 'number' }, either: { type: ['integer', 'null'] } } };

describe('int32Problems', () => {
  it('refuses integers outside int32 for an integer property, naming the range', () => {
    for (const v of [2 ** 31, -(2 ** 31) - 1, 2 ** 40]) {
      const problems = int32Problems(schema, { value: v });
      expect(problems).toHaveLength(1);
      expect(problems![0]!.argument).toBe('value');
      expect(problems![0]!.message).toContain('32-bit');
      expect(problems![0]!.message).toContain('-2147483648 to 2147483647');
    }
  });

  it('passes the int32 edges, and non-numbers', () => {
    expect(int32Problems(schema, { value: 2 ** 31 - 1 })).toBeUndefined();
    expect(int32Problems(schema, { value: -(2 ** 31) })).toBeUndefined();
    expect(int32Problems(schema, { value: 'big' })).toBeUndefined();
  });

  it('checks a type list holding integer, and leaves number properties and unknown arguments alone', () => {
    expect(int32Problems(schema, { either: 2 ** 33 })?.map((p) => p.argument)).toEqual(['either']);
    expect(int32Problems(schema, { ratio: 2 ** 40 })).toBeUndefined();
    expect(int32Problems(schema, { other: 2 ** 40 })).toBeUndefined();
  });

  it('names every argument out of range, and ignores inherited names', () => {
    const s = { properties: { a: { type: 'integer' }, b: { type: 'integer' } } };
    expect(int32Problems(s, { a: 2 ** 31, b: -(2 ** 32) })?.map((p) => p.argument)).toEqual(['a', 'b']);
    expect(int32Problems(s, { toString: 2 ** 40 })).toBeUndefined();
  });

  it('has nothing to say about a schema without properties', () => {
    expect(int32Problems({ type: 'object' }, { value: 2 ** 40 })).toBeUndefined();
    expect(int32Problems({ properties: null }, { value: 2 ** 40 })).toBeUndefined();
  });
});
