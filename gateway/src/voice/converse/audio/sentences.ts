/**
 * Streamed LLM text → complete sentences, each as soon as it ends, so synthesis starts with the first one.
 * A sentence ends at `.` `!` `?` `…` followed by white space (so "3.5" and "example.com" do not end one), or at
 * a CJK `。` `！` `？` at once, or at a line break; closing quotes and brackets stay with their sentence.
 * Common abbreviations and single-letter initials ("Dr.", "e.g.", "J.") do not end a sentence. Text that runs
 * past `maxChars` without an end is cut at the last comma or space before it (a hard cut when there is none).
 */

const ABBREVIATIONS = new Set([
  'mr',
  'mrs',
  'ms',
  'dr',
  'prof',
  'sr',
  'jr',
  'st',
  'mt',
  'vs',
  'etc',
  'e.g',
  'i.e',
  'eg',
  'ie',
  'no',
  'nr',
  'approx',
  'ca',
  'cf',
  'fig',
  'inc',
  'ltd',
  'co',
  'corp',
  'jan',
  'feb',
  'mar',
  'apr',
  'jun',
  'jul',
  'aug',
  'sep',
  'sept',
  'oct',
  'nov',
  'dec',
  'min',
  'max',
  'z.b',
  'bzw',
  'usw',
  'ggf',
  'evtl',
  'vgl',
  'str',
  'mme',
  'mlle',
  'sra',
]);
const CJK_END = new Set(['。', '！', '？', '｡']);
const LATIN_END = new Set(['.', '!', '?', '…']);
const CLOSERS = new Set(['"', "'", '”', '’', ')', ']', '}', '」', '』', '）', '】', '》', '*', '_']);
/** A letter or a digit: what makes a piece of text worth speaking. */
const WORD_CHAR = /[\p{L}\p{N}]/u;
/** Characters before a dot that can hold an abbreviation (the longest is 6): a longer word is no abbreviation. */
const ABBREVIATION_WINDOW = 32;
const SOFT_BREAKS = [', ', '; ', ': ', '，', '、', '；', '：', ' - ', ' – ', ' — '];

export interface SentenceSplitterOptions {
  /** Longest sentence handed out (characters); default 240. */
  maxChars?: number;
}

export class SentenceSplitter {
  private buf = '';
  private readonly maxChars: number;

  constructor(opts: SentenceSplitterOptions = {}) {
    this.maxChars = Math.max(20, opts.maxChars ?? 240);
  }

  /** A text delta in → the sentences it completes (possibly none). */
  push(delta: string): string[] {
    this.buf += delta;
    const out: string[] = [];
    for (;;) {
      const end = this.findEnd(false);
      if (end === undefined) break;
      this.take(end, out);
    }
    while (this.buf.length > this.maxChars) this.take(this.cutPoint(), out);
    return out;
  }

  /** The end of the answer: whatever is left, as sentences. */
  flush(): string[] {
    const out: string[] = [];
    for (;;) {
      const end = this.findEnd(true);
      if (end === undefined) break;
      this.take(end, out);
    }
    while (this.buf.length > this.maxChars) this.take(this.cutPoint(), out);
    this.take(this.buf.length, out);
    return out;
  }

  private take(end: number, out: string[]): void {
    const sentence = this.buf.slice(0, end).trim();
    this.buf = this.buf.slice(end);
    // A "sentence" of punctuation or markup alone says nothing.
    if (WORD_CHAR.test(sentence)) out.push(sentence);
  }

  /**
   * The index just past the first sentence end, or undefined while it is not certain yet. One pass: whether a word came
   * before a line break is carried along (testing the whole text before each break was quadratic in a run of breaks).
   */
  private findEnd(final: boolean): number | undefined {
    const s = this.buf;
    let worded = false;
    for (let i = 0; i < s.length; i++) {
      const c = s[i] ?? '';
      if (c === '\n') {
        if (worded) return i + 1;
        continue;
      }
      // A letter outside the BMP is two code units: tested whole.
      if (!worded && WORD_CHAR.test(isHighSurrogate(c) ? s.slice(i, i + 2) : c)) worded = true;
      if (!CJK_END.has(c) && !LATIN_END.has(c)) continue;
      let j = i + 1;
      // Runs of terminators ("?!", "...", "……") and closing quotes/brackets belong to this sentence.
      while (j < s.length && (LATIN_END.has(s[j] ?? '') || CJK_END.has(s[j] ?? '') || CLOSERS.has(s[j] ?? ''))) j++;
      if (CJK_END.has(c) || (c === '…' && isCjk(s[i - 1]))) return j;
      if (j === s.length) return final ? j : undefined; // the next delta decides
      if (!/\s/.test(s[j] ?? '')) {
        i = j - 1;
        continue; // "3.5", "example.com", "a.b"
      }
      if (c === '.' && j === i + 1 && this.isAbbreviation(i)) continue;
      return j;
    }
    return undefined;
  }

  /**
   * Whether the '.' at `dot` closes an abbreviation or an initial rather than a sentence. Only the characters just
   * before it are read: an abbreviation is short, and matching the whole text before every dot was quadratic in a
   * long unbroken word (a model's answer of 20 000 letters and 50 initials held the event loop for 0.4 s).
   */
  private isAbbreviation(dot: number): boolean {
    const before = this.buf.slice(Math.max(0, dot - ABBREVIATION_WINDOW), dot);
    const word = /([\p{L}.]+)$/u.exec(before)?.[1] ?? '';
    if (!word) return false;
    if (/^\p{Lu}$/u.test(word)) return true; // an initial: "J. R. R. Tolkien"
    return ABBREVIATIONS.has(word.toLowerCase());
  }

  /** Where to cut an over-long run: after the last soft break before maxChars, else at a space, else hard. */
  private cutPoint(): number {
    const head = this.buf.slice(0, this.maxChars);
    let best = -1;
    for (const b of SOFT_BREAKS) best = Math.max(best, head.lastIndexOf(b) + b.length);
    if (best > this.maxChars / 3) return best;
    const space = head.lastIndexOf(' ');
    return space > this.maxChars / 3 ? space + 1 : this.maxChars;
  }
}

function isHighSurrogate(c: string): boolean {
  const code = c.charCodeAt(0);
  return code >= 0xd800 && code <= 0xdbff;
}

function isCjk(c: string | undefined): boolean {
  return c !== undefined && /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]/u.test(c);
}
