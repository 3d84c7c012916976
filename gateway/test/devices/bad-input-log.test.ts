import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { badInputBudget, BadInputLog } from '../../src/devices/bad-input-log.js';

function capture() {
  const lines: Array<Record<string, unknown>> = [];
  const log = pino({ level: 'debug' }, { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) });
  return { log, lines };
}

describe('BadInputLog', () => {
  it('writes 20 lines a minute per level, counts every bad input, and says how many it held back', () => {
    const { log, lines } = capture();
    let now = 1_000_000;
    const bad = new BadInputLog(log, () => now);
    for (let i = 0; i < 25; i++) bad.note('warn', { reason: 'not_json' }, 'bad frame');
    expect(lines).toHaveLength(20);
    expect(lines.at(-1)).toMatchObject({ badInputs: 20, reason: 'not_json', msg: 'bad frame' });
    // Another level has a budget of its own.
    bad.note('debug', { reason: 'unknown_type' }, 'ignored');
    expect(lines).toHaveLength(21);
    expect(lines.at(-1)).toMatchObject({ badInputs: 26, level: 20 });
    now += 60_000;
    bad.note('warn', { reason: 'not_json' }, 'bad frame');
    expect(lines).toHaveLength(22);
    expect(lines.at(-1)).toMatchObject({ badInputs: 27, suppressed: 5 });
  });
  it('writes, over all sessions together, no more than the gateway budget, and says how many it held back', () => {
    const { log, lines } = capture();
    let now = 1_000_000;
    const budget = badInputBudget(log, { linesPerWindow: 30, windowMs: 10_000 }, () => now);
    // Two connections of one device (each a session with 20 lines of its own).
    for (const bad of [new BadInputLog(log, () => now, budget), new BadInputLog(log, () => now, budget)])
      for (let i = 0; i < 25; i++) bad.note('warn', { reason: 'not_json' }, 'bad frame');
    expect(lines).toHaveLength(30);
    now += 10_000;
    new BadInputLog(log, () => now, budget).note('warn', { reason: 'not_json' }, 'bad frame');
    expect(lines).toHaveLength(31);
    expect(lines.at(-1)).toMatchObject({ suppressedAll: 10, badInputs: 1 });
  });
});
