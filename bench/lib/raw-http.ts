/**
 * An HTTP/1.1 client on one keep-alive socket, one request at a time: what a load generator needs and no more
 * (wrk and autocannon write prebuilt requests on raw sockets for the same reason). With node:http's client the /mcp
 * load cost 264-509 µs of CPU per call at concurrency 1, as much as the proxy it measured, and more for a server that
 * answers in SSE than for one that answers in JSON; with this, 132-265 (docs/performance.md, `rawload`).
 * It reads Content-Length and chunked bodies, and bodies that end with the connection; it dials again when the
 * server closed the last one. Trusted servers only: it bounds nothing (the bench's own systems).
 */
import { connect, type Socket } from 'node:net';

export interface RawResponse {
  status: number;
  /** Header names in lower case; a repeated header keeps its last value. */
  headers: Record<string, string>;
  body: string;
}

interface Pending {
  resolve: (r: RawResponse) => void;
  reject: (e: Error) => void;
  /** A HEAD request's answer has no body, whatever its headers say. */
  head: boolean;
}

const CRLF = Buffer.from('\r\n');
const HEAD_END = Buffer.from('\r\n\r\n');

export class RawHttpConnection {
  private socket: Socket | undefined;
  private buf: Buffer = Buffer.alloc(0);
  private pending: Pending | undefined;
  private closed = false;

  constructor(
    private readonly host: string,
    private readonly port: number,
  ) {}

  /** `headers`: header lines, each ending in CRLF (a session's fixed ones are built once). */
  request(method: string, path: string, headers: string, body?: string): Promise<RawResponse> {
    if (this.pending) return Promise.reject(new Error('one request at a time on a RawHttpConnection'));
    if (this.closed) return Promise.reject(new Error('connection closed'));
    const socket = this.socket ?? this.dial();
    const length = body === undefined ? '' : `content-length: ${Buffer.byteLength(body)}\r\n`;
    return new Promise<RawResponse>((resolve, reject) => {
      this.pending = { resolve, reject, head: method === 'HEAD' };
      socket.write(`${method} ${path} HTTP/1.1\r\nhost: ${this.host}:${this.port}\r\n${headers}${length}\r\n${body ?? ''}`);
    });
  }

  close(): void {
    this.closed = true;
    this.socket?.destroy();
    this.socket = undefined;
    this.fail(new Error('connection closed'));
  }

  private dial(): Socket {
    const socket = connect(this.port, this.host);
    socket.setNoDelay(true);
    this.buf = Buffer.alloc(0);
    // Events of a socket this connection already let go (a `Connection: close` answer) concern no request.
    socket.on('data', (d: Buffer) => {
      if (this.socket !== socket) return;
      this.buf = this.buf.length === 0 ? d : Buffer.concat([this.buf, d]);
      this.parseOrFail(false);
    });
    socket.on('error', (e) => {
      if (this.socket === socket) this.fail(e);
    });
    socket.on('close', () => {
      if (this.socket !== socket) return;
      this.socket = undefined;
      // A body that ends with the connection is whole now; anything else waiting was cut off.
      this.parseOrFail(true);
      this.fail(new Error('the server closed the connection'));
    });
    this.socket = socket;
    return socket;
  }

  private fail(e: Error): void {
    const p = this.pending;
    this.pending = undefined;
    p?.reject(e);
  }

  private parseOrFail(ended: boolean): void {
    try {
      this.parse(ended);
    } catch (e) {
      this.fail(e as Error);
      this.socket?.destroy();
      this.socket = undefined;
    }
  }

  /** The response in `buf`, when it is all there (`ended`: the server closed the connection). */
  private parse(ended: boolean): void {
    const p = this.pending;
    if (!p) return;
    const headEnd = this.buf.indexOf(HEAD_END);
    if (headEnd < 0) return;
    const lines = this.buf.toString('latin1', 0, headEnd).split('\r\n');
    const status = Number(lines[0]!.split(' ')[1]);
    // 1xx (100 Continue) precede the answer: skipped.
    if (status >= 100 && status < 200) {
      this.buf = this.buf.subarray(headEnd + 4);
      return this.parse(ended);
    }
    const headers: Record<string, string> = {};
    for (let i = 1; i < lines.length; i++) {
      const colon = lines[i]!.indexOf(':');
      if (colon > 0) headers[lines[i]!.slice(0, colon).trim().toLowerCase()] = lines[i]!.slice(colon + 1).trim();
    }
    const start = headEnd + 4;
    const framed = this.frame(start, headers, p.head || status === 204 || status === 304, ended);
    if (!framed) return;
    this.buf = this.buf.subarray(framed.end);
    this.pending = undefined;
    if (headers['connection']?.toLowerCase() === 'close') {
      this.socket?.destroy();
      this.socket = undefined;
    }
    p.resolve({ status, headers, body: framed.body });
  }

  /** Where the body ends, and its text; undefined while it is not all there. */
  private frame(start: number, headers: Record<string, string>, empty: boolean, ended: boolean): { body: string; end: number } | undefined {
    if (empty) return { body: '', end: start };
    if (headers['transfer-encoding']?.toLowerCase().includes('chunked')) return this.chunked(start);
    const length = headers['content-length'];
    if (length !== undefined) {
      const end = start + Number(length);
      return this.buf.length < end ? undefined : { body: this.buf.toString('utf8', start, end), end };
    }
    // Neither: the body runs to the connection's end.
    return ended ? { body: this.buf.toString('utf8', start), end: this.buf.length } : undefined;
  }

  private chunked(start: number): { body: string; end: number } | undefined {
    const parts: Buffer[] = [];
    let at = start;
    for (;;) {
      const lineEnd = this.buf.indexOf(CRLF, at);
      if (lineEnd < 0) return undefined;
      const size = parseInt(this.buf.toString('latin1', at, lineEnd), 16);
      if (!Number.isFinite(size)) throw new Error(`bad chunk size at byte ${at}`);
      if (size === 0) {
        // The last chunk, then trailers (none expected) up to an empty line.
        const end = this.buf.indexOf(HEAD_END, lineEnd);
        return end < 0 ? undefined : { body: Buffer.concat(parts).toString('utf8'), end: end + 4 };
      }
      const dataEnd = lineEnd + 2 + size;
      if (this.buf.length < dataEnd + 2) return undefined;
      parts.push(this.buf.subarray(lineEnd + 2, dataEnd));
      at = dataEnd + 2;
    }
  }
}
