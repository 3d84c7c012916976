/**
 * Newline-delimited messages from a stdio MCP server, each bounded in size. A line over the bound is
 * skipped up to its newline instead of ending the stream (the SDK's ReadBuffer can only give up on the
 * whole connection): JSON text holds no raw newline, so the next line is the next message. Of a skipped
 * line only its first and last bytes are kept, enough to find the JSON-RPC id it answers.
 */
export type Line = { kind: 'line'; text: string } | { kind: 'oversized'; bytes: number; head: string; tail: string };

const KEEP = 512;

export class BoundedLineReader {
  private chunks: Buffer[] = [];
  private length = 0;
  /** Inside an oversized line: bytes skipped so far, its head and a rolling tail. */
  private skipping: { bytes: number; head: Buffer; tail: Buffer } | undefined;

  constructor(private readonly maxLineBytes: number) {}

  /** Feed a chunk; returns the complete lines it finished, in order. */
  push(chunk: Buffer): Line[] {
    const out: Line[] = [];
    let from = 0;
    for (;;) {
      const nl = chunk.indexOf(0x0a, from);
      // A whole line inside this chunk (nothing kept from an earlier one): decoded in place, no copy (issue 21).
      if (nl !== -1 && this.length === 0 && !this.skipping && nl - from <= this.maxLineBytes) {
        out.push({ kind: 'line', text: withoutCr(chunk.toString('utf8', from, nl)) });
        from = nl + 1;
        continue;
      }
      const piece = chunk.subarray(from, nl === -1 ? chunk.length : nl);
      this.take(piece);
      if (nl === -1) break;
      out.push(this.finishLine());
      from = nl + 1;
    }
    return out;
  }

  clear(): void {
    this.chunks = [];
    this.length = 0;
    this.skipping = undefined;
  }

  private take(piece: Buffer): void {
    if (piece.length === 0) return;
    if (this.skipping) {
      this.skipping.bytes += piece.length;
      this.skipping.tail = Buffer.concat([this.skipping.tail, piece.subarray(-KEEP)]).subarray(-KEEP);
      return;
    }
    if (this.length + piece.length <= this.maxLineBytes) {
      this.chunks.push(Buffer.from(piece));
      this.length += piece.length;
      return;
    }
    const sofar = Buffer.concat([...this.chunks, piece]);
    this.skipping = { bytes: sofar.length, head: sofar.subarray(0, KEEP), tail: sofar.subarray(-KEEP) };
    this.chunks = [];
    this.length = 0;
  }

  private finishLine(): Line {
    if (this.skipping) {
      const s = this.skipping;
      this.skipping = undefined;
      return { kind: 'oversized', bytes: s.bytes, head: s.head.toString('utf8'), tail: s.tail.toString('utf8') };
    }
    const text = withoutCr(Buffer.concat(this.chunks).toString('utf8'));
    this.chunks = [];
    this.length = 0;
    return { kind: 'line', text };
  }
}

const withoutCr = (line: string) => (line.endsWith('\r') ? line.slice(0, -1) : line);

/** The JSON-RPC id of a message from its first or last bytes: `{"jsonrpc":"2.0","id":7,...` or `...,"id":7}`. */
export function idOfTruncated(head: string, tail: string): string | number | undefined {
  const ID = String.raw`(-?\d{1,15}|"(?:[^"\\]|\\.){0,256}")`;
  const m =
    new RegExp(String.raw`^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*${ID}\s*,`).exec(head) ??
    new RegExp(String.raw`,\s*"id"\s*:\s*${ID}\s*\}\s*$`).exec(tail.replace(/\r$/, ''));
  if (!m) return undefined;
  try {
    return JSON.parse(m[1]!) as string | number;
  } catch {
    return undefined;
  }
}
