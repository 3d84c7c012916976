import { describe, expect, it } from 'vitest';
import { forTerminal, hasUnshowable } from '../../src/schemas/showable.js';

describe('showable text', () => {
  it('finds controls (C0, DEL, C1), bidirectional formatting and line separators; any script, accent and emoji pass', () => {
    for (const c of [
      '\u0000',
      '\u001b',
      '\r',
      '\n',
      '\u007f',
      '\u0085',
      '\u009b',
      '\u061c',
      '\u200e',
      '\u200f',
      '\u2028',
      '\u2029',
      '\u202e',
      '\u2066',
      '\u2069',
    ])
      expect(hasUnshowable(`a${c}b`), JSON.stringify(c)).toBe(true);
    for (const s of ['Kitchen lamp', 'Küche', '客厅的灯', 'غرفة', '🛋️ sofa', 'a\u00a0b']) expect(hasUnshowable(s), s).toBe(false);
  });

  it('for a terminal: each such character becomes U+FFFD but line breaks and tabs, the layout the text is written with', () => {
    expect(forTerminal('ok\n\tindented')).toBe('ok\n\tindented');
    expect(forTerminal('\u001b]0;title\u0007\u001b[2Jx\r\u202ey')).toBe('\ufffd]0;title\ufffd\ufffd[2Jx\ufffd\ufffdy');
    expect(forTerminal('客厅 🛋️')).toBe('客厅 🛋️');
  });
});
