import { BufferList, BufferListStream } from 'bl';
import type { Client } from 'aedes';

/** The part of mqtt-packet's parser this reaches into: the byte list it reads packets from. */
interface ParserList {
  _list?: unknown;
}

/**
 * Gives an mqtt-packet parser a plain `BufferList` in place of the `BufferListStream` it makes for itself. The parser
 * only appends, reads and consumes bytes (the BufferList half of the class); the stream half is a Duplex that nothing
 * pipes into, and its two stream states cost ~0.8 KB per MQTT connection (docs/performance.md, "lean"). True when the
 * swap was made: false when mqtt-packet no longer holds the list where this expects it (a test asserts the swap on the
 * installed version), and the parser then keeps its own list, as before. Only a fresh parser's list is swapped
 * (nothing is buffered in it yet); it makes a stream list again after a parse error, when its connection is closed.
 */
export function leanParserList(parser: object): boolean {
  const p = parser as ParserList;
  if (!(p._list instanceof BufferListStream) || p._list.length !== 0) return false;
  p._list = new BufferList();
  return true;
}

/** `leanParserList` for the parser a new broker client reads its connection with (aedes' `Client._parser`). */
export function leanParserBuffer(client: Client): boolean {
  const parser = (client as unknown as { _parser?: object })._parser;
  return parser !== undefined && leanParserList(parser);
}
