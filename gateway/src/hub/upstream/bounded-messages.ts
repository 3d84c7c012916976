import { clientSdk } from '../client-sdk.js';
import { idOfTruncated } from '../line-reader.js';
import { RESULT_TOO_LARGE } from '../stdio-transport.js';

/** Bytes of an SSE event kept from its start and its end: enough to find the JSON-RPC id it answers. */
const KEEP = 512;

/** What a Streamable HTTP or SSE server sent over the bound: its size, and whether it was an SSE event. */
export type OversizedMessage = { bytes: number; id: string | number | undefined };

/**
 * A `fetch` for the SDK's Streamable HTTP and SSE client transports whose answers are bounded per message, as a stdio
 * server's lines are (stdio-transport.ts): the SDK reads a JSON answer whole (`response.json()`), and an SSE event's
 * data until the event ends, however large the server makes them. A hosted server answering one call with an event
 * that never ended held 418 MB of the gateway's heap within seconds, and every further megabyte (red team 10).
 *
 * - An SSE event over `maxBytes` is passed on no further (told through `onOversized` as it crosses the bound): the SDK's parser is handed the end of the event (it fails to
 *   parse what it holds, at most `maxBytes`, and drops it), then, when the server ends the event, an error answer
 *   (RESULT_TOO_LARGE, as stdio's) for the request whose id the event's first or last bytes name. The stream goes on.
 * - Any other body over `maxBytes` fails with that error at once (`response.json()` rejects; the request fails).
 */
export function boundedMessages(inner: typeof fetch, maxBytes: number, maxResultBytes: number, onOversized: (m: OversizedMessage) => void): typeof fetch {
  return async (input, init) => {
    const res = await inner(input, init);
    // (A status that may carry no body cannot be given one: `new Response` throws.)
    if (!res.body || [101, 204, 205, 304].includes(res.status)) return res;
    const sse = (res.headers.get('content-type') ?? '').toLowerCase().includes('text/event-stream');
    const tooLarge = (bytes: number) => `the server's answer was ${bytes} bytes, over the limit of ${maxResultBytes} bytes (mcp.maxResultBytes)`;
    const stream = sse ? boundedEvents(maxBytes, tooLarge, onOversized) : boundedBody(maxBytes, tooLarge, onOversized);
    return new Response(res.body.pipeThrough(stream), { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

function boundedBody(
  maxBytes: number,
  tooLarge: (bytes: number) => string,
  onOversized: (m: OversizedMessage) => void,
): TransformStream<Uint8Array, Uint8Array> {
  let seen = 0;
  return new TransformStream({
    transform(chunk, ctl) {
      seen += chunk.byteLength;
      if (seen <= maxBytes) return ctl.enqueue(chunk);
      onOversized({ bytes: seen, id: undefined });
      const { ProtocolError } = clientSdk();
      ctl.error(new ProtocolError(RESULT_TOO_LARGE, tooLarge(seen)));
    },
  });
}

function boundedEvents(
  maxBytes: number,
  tooLarge: (bytes: number) => string,
  onOversized: (m: OversizedMessage) => void,
): TransformStream<Uint8Array, Uint8Array> {
  /** Bytes of the current event so far. */
  let size = 0;
  /** The current line has a byte other than `\r` so far (a blank line ends an event). */
  let lineHasContent = false;
  let head = Buffer.alloc(0);
  let tail = Buffer.alloc(0);
  let skipping = false;
  const encoder = new TextEncoder();

  const endEvent = (ctl: TransformStreamDefaultController<Uint8Array>, blankLine: Buffer) => {
    if (!skipping) ctl.enqueue(blankLine);
    else {
      const id = idOfTruncated(eventData(head), tail.toString('utf8'));
      // The SDK's parser ends what it holds of the event (and fails to parse it); then the call's answer.
      let out = '\n\n';
      if (id !== undefined) {
        const answer = { jsonrpc: '2.0', id, error: { code: RESULT_TOO_LARGE, message: tooLarge(size) } };
        out += `event: message\ndata: ${JSON.stringify(answer)}\n\n`;
      }
      ctl.enqueue(encoder.encode(out));
    }
    size = 0;
    head = Buffer.alloc(0);
    tail = Buffer.alloc(0);
    skipping = false;
  };

  const take = (ctl: TransformStreamDefaultController<Uint8Array>, piece: Buffer) => {
    size += piece.length;
    if (head.length < KEEP) head = Buffer.concat([head, piece.subarray(0, KEEP - head.length)]);
    tail = Buffer.concat([tail, piece.subarray(-KEEP)]).subarray(-KEEP);
    if (!skipping && size > maxBytes) {
      // Told now: an event that never ends is skipped for as long as it lasts.
      skipping = true;
      onOversized({ bytes: size, id: undefined });
    }
    if (!skipping) ctl.enqueue(piece);
  };

  return new TransformStream({
    transform(chunk, ctl) {
      const buf = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      for (let from = 0; from < buf.length;) {
        const nl = buf.indexOf(0x0a, from);
        const end = nl === -1 ? buf.length : nl + 1;
        const piece = buf.subarray(from, end);
        from = end;
        const content = nl === -1 ? piece : piece.subarray(0, piece.length - 1);
        const onlyCr = content.every((b) => b === 0x0d);
        if (nl !== -1 && !lineHasContent && onlyCr) {
          endEvent(ctl, piece);
          continue;
        }
        take(ctl, piece);
        lineHasContent = nl === -1 ? lineHasContent || !onlyCr : false;
      }
    },
  });
}

/** An event's first bytes from its data: `event: message\nid: 3\ndata: {"jsonrpc"...` gives `{"jsonrpc"...`. */
function eventData(head: Buffer): string {
  const text = head.toString('utf8');
  const at = text.search(/(?:^|\n)data:/);
  if (at === -1) return '';
  const start = text.indexOf('data:', at) + 5;
  return text.slice(text[start] === ' ' ? start + 1 : start);
}
