import { referenceResultTail } from '@voxgate/protocol';
import { describe, expect, it } from 'vitest';
import { resultTail } from '../../src/devices/page-reader.js';

describe('resultTail', () => {
  it('is the reference layout tail of the id, the same string for every walk of a small id', () => {
    for (const id of [0, 1, 2, 3, 17, 255, 256, 1000, 2 ** 31 - 1, -1]) expect(resultTail(id)).toBe(referenceResultTail(id));
    // Kept once per small id: every device's walk reads the same string (no text made per page).
    expect(Object.is(resultTail(2), resultTail(2))).toBe(true);
  });
});
