/** Identifier-like words: a linear scan with a fixed expression (device text never becomes a regex). */
const WORD = /[A-Za-z0-9_][A-Za-z0-9_.-]*/g;

/**
 * Firmware descriptions name other tools of the same device by their own names ("call
 * `self.get_device_status` first"); behind a namespace those names do not exist. Every word of `text`
 * that `rename` knows (its device's tool name → the namespaced name) is replaced; a trailing dot (end of
 * a sentence) is kept out of the word. Only names with a `.` or `_` are considered, so a tool named like
 * an ordinary word ("status") never rewrites prose. Pure: same input, same output.
 */
export function rewriteToolReferences(text: string, rename: (tool: string) => string | undefined): string {
  return text.replace(WORD, (word) => {
    let end = word.length;
    while (end > 0 && word[end - 1] === '.') end--;
    const name = word.slice(0, end);
    if (!name.includes('.') && !name.includes('_')) return word;
    const renamed = rename(name);
    return renamed === undefined ? word : renamed + word.slice(end);
  });
}
