/** The CLI's view of a running gateway: its public HTTP API, nothing else. */

export interface TurnEventData {
  type: string;
  [k: string]: unknown;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    detail: string,
  ) {
    super(detail);
  }
}

export class GatewayClient {
  constructor(
    private readonly url: string,
    private readonly key: string | undefined,
  ) {}

  private headers(json: boolean): Record<string, string> {
    const h: Record<string, string> = {};
    if (this.key) h['authorization'] = `Bearer ${this.key}`;
    if (json) h['content-type'] = 'application/json';
    return h;
  }

  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await fetch(this.url + path, { method, headers: this.headers(body !== undefined), body: body === undefined ? null : JSON.stringify(body) });
    const text = await res.text();
    if (!res.ok) throw toApiError(res.status, text);
    return (text ? JSON.parse(text) : undefined) as T;
  }

  /** One streamed turn: every SSE event goes to `onEvent`; resolves when the stream ends. */
  async turn(body: Record<string, unknown>, signal: AbortSignal, onEvent: (e: TurnEventData) => void | Promise<void>): Promise<void> {
    const res = await fetch(`${this.url}/v1/assistant/chat`, {
      method: 'POST',
      headers: this.headers(true),
      body: JSON.stringify({ ...body, stream: true }),
      signal,
    });
    if (!res.ok || !res.body) throw toApiError(res.status, await res.text());
    const decoder = new TextDecoder();
    let buf = '';
    for await (const chunk of res.body) {
      buf += decoder.decode(chunk as Uint8Array, { stream: true });
      let i: number;
      while ((i = buf.indexOf('\n\n')) !== -1) {
        const frame = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const data = frame
          .split('\n')
          .filter((l) => l.startsWith('data: '))
          .map((l) => l.slice(6))
          .join('\n');
        if (data) await onEvent(JSON.parse(data) as TurnEventData);
      }
    }
  }
}

function toApiError(status: number, text: string): ApiError {
  try {
    const p = JSON.parse(text) as { code?: string; detail?: string };
    return new ApiError(status, p.code ?? `HTTP_${status}`, p.detail ?? text);
  } catch {
    return new ApiError(status, `HTTP_${status}`, text.slice(0, 200) || `HTTP ${status}`);
  }
}
