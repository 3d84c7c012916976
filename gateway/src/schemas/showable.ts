/**
 * Characters a screen obeys rather than shows: controls (C0, DEL, C1: a terminal's escapes, carriage returns),
 * bidirectional formatting (right-to-left overrides that reorder what is read) and the line and paragraph separators.
 * Names people give devices may not hold them; a terminal shows none that a device, a tool or a model sent.
 */
const UNSHOWABLE_CLASS = '\\u0000-\\u001f\\u007f-\\u009f\\u061c\\u200e\\u200f\\u2028\\u2029\\u202a-\\u202e\\u2066-\\u2069';

/** Whether `s` holds any such character. */
export function hasUnshowable(s: string): boolean {
  return UNSHOWABLE.test(s);
}

/**
 * `s` for a terminal: each such character but a line break and a tab (the layout text written for a terminal uses)
 * replaced by U+FFFD, so what a device or a model sent cannot move the cursor, reset the terminal or reorder a line.
 */
export function forTerminal(s: string): string {
  return s.replace(TERMINAL_UNSAFE, '\ufffd');
}

const UNSHOWABLE = new RegExp(`[${UNSHOWABLE_CLASS}]`);
const TERMINAL_UNSAFE = new RegExp(`(?![\\n\\t])[${UNSHOWABLE_CLASS}]`, 'g');
