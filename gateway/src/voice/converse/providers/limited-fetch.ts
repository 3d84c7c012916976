/**
 * A `fetch` for the speech SDK clients whose response bodies are bounded: the SDK reads a JSON answer (a transcript, an
 * error) whole into memory, however large the server makes it. Past `maxBytes` the body fails with ProviderError
 * `too_long` and the connection is closed; nothing more is read.
 */
import { ProviderError } from '../contracts.js';

export type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

export function limitedFetch(maxBytes: number, provider: string, inner: FetchLike = fetch): FetchLike {
  return async (input, init) => {
    const res = await inner(input, init);
    if (!res.body) return res;
    let seen = 0;
    const bounded = res.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, ctl) {
          seen += chunk.byteLength;
          if (seen > maxBytes) ctl.error(new ProviderError('too_long', `the response was larger than ${maxBytes} bytes`, provider));
          else ctl.enqueue(chunk);
        },
      }),
    );
    return new Response(bounded, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}
