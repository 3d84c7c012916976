/**
 * An upgrade request's target split into its path and its query, without a WHATWG URL parse: every device's upgrade
 * went through two (`new URL`, ~11 µs each, issue 21's fleet rows), one per upgrade listener. The path is taken as
 * sent: no dot segment resolved, no percent-decoding, and no host read out of a `//` prefix (which `new URL` did), so
 * only the exact path (a trailing slash or not) reaches an endpoint. The query is parsed only when it is asked for.
 */
export class RequestTarget {
  readonly path: string;
  private readonly search: string;
  private params: URLSearchParams | undefined;

  constructor(url: string | undefined) {
    const raw = url || '/';
    const q = raw.indexOf('?');
    this.path = q < 0 ? raw : raw.slice(0, q);
    this.search = q < 0 ? '' : raw.slice(q + 1);
  }

  /** A query parameter's first value, or null (URLSearchParams' `get`). */
  query(name: string): string | null {
    if (this.search === '') return null;
    this.params ??= new URLSearchParams(this.search);
    return this.params.get(name);
  }
}

/** A path without its trailing slashes ("/" stays "/"): `/xiaozhi/v1` and `/xiaozhi/v1/` name one endpoint. */
export function trimSlashes(path: string): string {
  return path.replace(/\/+$/, '') || '/';
}
