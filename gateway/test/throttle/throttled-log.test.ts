import { describe, expect, it } from 'vitest';
import { ThrottledLog, type LevelLog } from '../../src/throttle/throttled-log.js';

function recorder() {
  const lines: Array<{ level: string; obj: Record<string, unknown>; msg: string }> = [];
  const at = (level: string) => (obj: Record<string, unknown>, msg: string) => void lines.push({ level, obj, msg });
  const log: LevelLog = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
  return { log, lines };
}

describe('ThrottledLog', () => {
  it('writes at most linesPerWindow lines per window, then tells how many it held back', () => {
    let now = 0;
    const { log, lines } = recorder();
    const t = new ThrottledLog(log, 'error', { linesPerWindow: 2, windowMs: 60_000 }, () => now);
    const written = Array.from({ length: 5 }, (_, i) => t.write({ i }, 'boom'));
    expect(written).toEqual([true, true, false, false, false]);
    expect(lines.map((l) => l.obj)).toEqual([{ i: 0 }, { i: 1 }]);
    now += 59_999;
    expect(t.write({ i: 5 }, 'boom')).toBe(false);
    now += 1;
    expect(t.write({ i: 6 }, 'boom')).toBe(true);
    expect(lines[2]).toEqual({ level: 'error', obj: { i: 6, suppressed: 4 }, msg: 'boom' });
    expect(t.write({ i: 7 }, 'boom')).toBe(true);
    expect(lines[3]!.obj).toEqual({ i: 7 }); // nothing held back since the last line
  });

  it('a wall clock stepped back starts a window: lines are not held back until it catches up', () => {
    let now = 10_000_000;
    const { log, lines } = recorder();
    const t = new ThrottledLog(log, 'warn', { linesPerWindow: 1, windowMs: 60_000 }, () => now);
    expect(t.write({ i: 0 }, 'x')).toBe(true);
    expect(t.write({ i: 1 }, 'x')).toBe(false);
    now -= 3_600_000; // NTP steps the clock an hour back
    expect(t.write({ i: 2 }, 'x')).toBe(true);
    expect(lines.at(-1)!.obj).toEqual({ i: 2, suppressed: 1 });
    expect(t.write({ i: 3 }, 'x')).toBe(false); // and the new window holds as any other
  });

  it('keeps a window per key, bounded by maxKeys; a forgotten key starts afresh', () => {
    const now = 0;
    const { log, lines } = recorder();
    const t = new ThrottledLog(log, 'warn', { linesPerWindow: 1, windowMs: 60_000, maxKeys: 2 }, () => now);
    expect(t.write({}, 'a', 'dev-a')).toBe(true);
    expect(t.write({}, 'a', 'dev-a')).toBe(false);
    expect(t.write({}, 'b', 'dev-b')).toBe(true); // a's flood never silences b
    t.forget('dev-a');
    expect(t.write({}, 'a', 'dev-a')).toBe(true);
    expect(t.write({}, 'c', 'dev-c')).toBe(true); // evicts the least recent (dev-b)
    expect(t.write({}, 'b', 'dev-b')).toBe(true);
    expect(lines.map((l) => l.msg)).toEqual(['a', 'b', 'a', 'c', 'b']);
  });
});
