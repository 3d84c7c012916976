/**
 * A `fetch` for SDK clients whose response bodies are bounded: an SDK reads a JSON answer (a transcript, a model's
 * reply, an error) whole into memory, and an SSE stream's line until its end, however large the server makes them.
 * Past `maxBytes` the body fails with the error `tooLarge` makes and the connection is closed; nothing more is read.
 * Used by the speech providers (voice/converse/providers) and the assistant's model providers.
 */
export type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

export function limitedFetch(maxBytes: number, tooLarge: () => Error, inner: FetchLike = fetch): FetchLike {
  return async (input, init) => {
    const res = await inner(input, init);
    if (!res.body) return res;
    let seen = 0;
    const bounded = res.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, ctl) {
          seen += chunk.byteLength;
          if (seen > maxBytes) ctl.error(tooLarge());
          else ctl.enqueue(chunk);
        },
      }),
    );
    return new Response(bounded, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}
