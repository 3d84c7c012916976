/**
 * Complete sentences out of a streamed answer, so synthesis starts with the first one. A sentence ends at
 * . ! ? ; followed by a space (decimals and "e.g." inside words stay whole), at CJK end punctuation, or
 * at a line break. A sentence longer than `maxChars` is cut at the last space before it (a list read
 * without stops still starts speaking).
 */
export interface SentenceSplitter {
  push(delta: string): string[];
  /** What is left at the end of the answer. */
  flush(): string[];
}

const END = /([.!?;:…]+["')\]]*\s+|[。！？；]+|\n+)/g;

export function sentenceSplitter(maxChars = 300): SentenceSplitter {
  let buf = '';
  const take = (): string[] => {
    const out: string[] = [];
    let from = 0;
    END.lastIndex = 0;
    for (let m = END.exec(buf); m; m = END.exec(buf)) {
      const end = m.index + m[0].length;
      const s = buf.slice(from, end).trim();
      if (s) out.push(s);
      from = end;
    }
    buf = buf.slice(from);
    while (buf.length > maxChars) {
      const cut = buf.lastIndexOf(' ', maxChars);
      const at = cut > maxChars / 2 ? cut : maxChars;
      out.push(buf.slice(0, at).trim());
      buf = buf.slice(at);
    }
    return out;
  };
  return {
    push(delta) {
      buf += delta;
      return take();
    },
    flush() {
      const out = take();
      const rest = buf.trim();
      buf = '';
      if (rest) out.push(rest);
      return out;
    },
  };
}
