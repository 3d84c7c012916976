import { describe, expect, it } from 'vitest';
import { lowerBound, mergeSorted, upperBound } from '../../src/devices/sorted-ids.js';

const ids = ['02:00:00:00:00:01', '02:00:00:00:00:03', '02:00:00:00:00:03', '02:00:00:00:00:07'];

describe('lowerBound and upperBound', () => {
  it('find the first index not less than / greater than a value, around duplicates', () => {
    expect(lowerBound(ids, '02:00:00:00:00:03')).toBe(1);
    expect(upperBound(ids, '02:00:00:00:00:03')).toBe(3);
    expect(lowerBound(ids, '02:00:00:00:00:02')).toBe(1);
    expect(upperBound(ids, '02:00:00:00:00:02')).toBe(1);
  });

  it('answer 0 before the first element and the length after the last', () => {
    expect(lowerBound(ids, '00')).toBe(0);
    expect(upperBound(ids, '00')).toBe(0);
    expect(lowerBound(ids, 'ff')).toBe(ids.length);
    expect(upperBound(ids, '02:00:00:00:00:07')).toBe(ids.length);
  });

  it('answer 0 for an empty array', () => {
    expect(lowerBound([], 'a')).toBe(0);
    expect(upperBound([], 'a')).toBe(0);
  });

  it('agree with a linear scan on every probe', () => {
    const a = ['a', 'b', 'b', 'd', 'f', 'f', 'f', 'k'];
    for (const v of ['', 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'k', 'z']) {
      expect(lowerBound(a, v)).toBe(a.filter((x) => x < v).length);
      expect(upperBound(a, v)).toBe(a.filter((x) => x <= v).length);
    }
  });
});

describe('mergeSorted', () => {
  it('gives what sorting both together gives, whatever their sizes and overlaps', () => {
    const cases: Array<[string[], string[]]> = [
      [[], []],
      [['a'], []],
      [[], ['b', 'c']],
      [
        ['a', 'c', 'e'],
        ['b', 'd', 'f', 'g'],
      ],
      [
        ['b', 'b', 'x'],
        ['a', 'b', 'y', 'z'],
      ],
      [
        ['02:00:00:00:00:0A', '02:00:00:00:00:0b'],
        ['02:00:00:00:00:09', '02:00:00:00:00:0B', '02:00:00:00:00:1'],
      ],
    ];
    for (const [a, b] of cases) expect(mergeSorted(a, b)).toEqual([...a, ...b].sort());
  });
});
