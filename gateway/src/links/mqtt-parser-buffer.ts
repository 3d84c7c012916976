import { BufferList, BufferListStream } from 'bl';
import type { Client } from 'aedes';

/** The part of aedes' client this reaches into: the mqtt-packet parser it reads its connection with. */
interface ParserHolder {
  _parser?: { _list?: unknown };
}

/**
 * Gives a new broker client's packet parser a plain `BufferList` in place of the `BufferListStream` mqtt-packet makes
 * for it. The parser only appends, reads and consumes bytes (the BufferList half of the class); the stream half is a
 * Duplex that nothing pipes into, and its two stream states cost ~0.8 KB per MQTT connection (docs/performance.md,
 * "lean"). True when the swap was made: false when aedes or mqtt-packet no longer hold the list where this expects
 * it (a test asserts the swap on the installed versions), and the client then keeps its own list, as before.
 * Only a fresh client's list is swapped (nothing is buffered in it yet); the parser makes a stream list again after a
 * parse error, when aedes closes the client anyway.
 */
export function leanParserBuffer(client: Client): boolean {
  const parser = (client as unknown as ParserHolder)._parser;
  const list = parser?._list;
  if (!parser || !(list instanceof BufferListStream) || list.length !== 0) return false;
  parser._list = new BufferList();
  return true;
}
