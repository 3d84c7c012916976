import { AsyncQueue } from './wait.js';

export interface SseEvent {
  id?: string;
  event?: string;
  data: string;
}

export interface SseStream {
  status: number;
  contentType: string | null;
  events: AsyncQueue<SseEvent>;
  close(): void;
}

/** A minimal text/event-stream reader over fetch (what a backend service would run). */
export async function openSse(url: string, headers: Record<string, string>): Promise<SseStream> {
  const ac = new AbortController();
  const res = await fetch(url, { headers, signal: ac.signal });
  const events = new AsyncQueue<SseEvent>();
  if (res.body) {
    void (async () => {
      const decoder = new TextDecoder();
      let buf = '';
      try {
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          buf += decoder.decode(chunk, { stream: true });
          let cut: number;
          while ((cut = buf.indexOf('\n\n')) >= 0) {
            const block = buf.slice(0, cut);
            buf = buf.slice(cut + 2);
            const e: SseEvent = { data: '' };
            let hasData = false;
            for (const line of block.split('\n')) {
              if (line.startsWith(':')) continue;
              const i = line.indexOf(':');
              const field = i < 0 ? line : line.slice(0, i);
              const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
              if (field === 'id') e.id = value;
              else if (field === 'event') e.event = value;
              else if (field === 'data') {
                e.data += (hasData ? '\n' : '') + value;
                hasData = true;
              }
            }
            if (hasData) events.push(e);
          }
        }
      } catch {
        // aborted by close()
      }
    })();
  }
  return { status: res.status, contentType: res.headers.get('content-type'), events, close: () => ac.abort() };
}
