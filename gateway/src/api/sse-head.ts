import type { ServerResponse } from 'node:http';

/** Starts a Server-Sent Events answer: no caching or transforming, and no buffering by a proxy in front. */
export function writeSseHead(res: ServerResponse): void {
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
}
