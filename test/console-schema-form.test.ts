import { describe, expect, it } from 'vitest';
import { collectArgs, fieldsOf, initialValue } from '../console/src/lib/schema-form.js';

/** The console's form generator: inputSchema (untrusted) to fields, form values back to typed arguments. */
describe('console schema form', () => {
  const schema = {
    type: 'object',
    properties: {
      volume: { type: 'integer', minimum: 0, maximum: 100, default: 50, description: 'Speaker volume' },
      gain: { type: 'number', maximum: 1.5 },
      mode: { enum: ['auto', 'manual'] },
      speed: { enum: [1, 2, 4], default: 2 },
      mute: { type: 'boolean', default: true },
      name: { type: 'string', maxLength: 12, pattern: '(a+)+$' },
      extra: { type: 'object', properties: { a: { type: 'string' } } },
    },
    required: ['volume', 'mode'],
  };

  it('reads types, enums, ranges, defaults and required; anything else is a JSON field', () => {
    const fields = fieldsOf(schema);
    expect(fields.map((f) => [f.name, f.kind, f.required])).toEqual([
      ['volume', 'integer', true],
      ['gain', 'number', false],
      ['mode', 'enum', true],
      ['speed', 'enum', false],
      ['mute', 'boolean', false],
      ['name', 'string', false],
      ['extra', 'json', false],
    ]);
    expect(fields[0]).toMatchObject({ minimum: 0, maximum: 100, default: 50, description: 'Speaker volume' });
    expect(fields[3]!.options).toEqual([1, 2, 4]);
    // A device's pattern is never taken into the browser (it would run on a backtracking engine).
    expect(fields[5]).not.toHaveProperty('pattern');
    expect(fields.map(initialValue)).toEqual(['50', '', '', '2', true, '', '']);
  });

  it('turns form text into typed arguments, leaves empty optional fields out, and refuses what the schema forbids', () => {
    const fields = fieldsOf(schema);
    const base = { volume: '70', gain: '', mode: '"manual"', speed: '4', mute: false, name: 'desk', extra: '{"a":"b"}' };
    expect(collectArgs(fields, base)).toEqual({ ok: true, args: { volume: 70, mode: 'manual', speed: 4, mute: false, name: 'desk', extra: { a: 'b' } } });
    expect(collectArgs(fields, { ...base, volume: '' })).toMatchObject({ ok: false, field: 'volume' });
    expect(collectArgs(fields, { ...base, volume: '7.5' })).toMatchObject({ ok: false, message: 'volume must be a whole number' });
    expect(collectArgs(fields, { ...base, volume: '101' })).toMatchObject({ ok: false, message: 'volume must be at most 100' });
    expect(collectArgs(fields, { ...base, gain: '2' })).toMatchObject({ ok: false, message: 'gain must be at most 1.5' });
    expect(collectArgs(fields, { ...base, extra: '{' })).toMatchObject({ ok: false, message: 'extra is not valid JSON' });
  });

  it('survives hostile schemas: not objects, huge property lists, odd enums', () => {
    for (const bad of [null, 'x', 42, [], { properties: 'x' }, { properties: [] }]) expect(fieldsOf(bad)).toEqual([]);
    const many = { properties: Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`p${i}`, { type: 'string' }])) };
    expect(fieldsOf(many)).toHaveLength(64);
    expect(fieldsOf({ properties: { e: { enum: [{ a: 1 }] }, n: null } }).map((f) => f.kind)).toEqual(['json', 'json']);
  });
});
