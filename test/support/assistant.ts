import { TEST_API_KEY, type TestGateway } from './gateway-harness.js';
import type { LlmServer } from './llm-server.js';
import { AsyncQueue } from './wait.js';

/** Helpers for the assistant tests: model config pointing at the scripted LLM server, and a POST SSE reader. */

export const LLM_KEY_ENV = 'VOXGATE_TEST_LLM_KEY';
export const LLM_KEY = 'sk-test-llm-key-not-for-logs';

/** Named models on the scripted server: `oa` (OpenAI Chat Completions), `an` (Anthropic Messages), `ge` (Gemini), `mk` (OpenAI, markers), `no` (OpenAI, no tools). */
export function llmModels(llm: LlmServer) {
  process.env[LLM_KEY_ENV] = LLM_KEY;
  const common = { apiKeyEnv: LLM_KEY_ENV, maxRetries: 0 };
  return {
    oa: { provider: 'openai' as const, baseUrl: `${llm.url}/v1`, model: 'gpt-test', ...common },
    an: { provider: 'anthropic' as const, baseUrl: llm.url, model: 'claude-test', ...common },
    mk: { provider: 'openai' as const, baseUrl: `${llm.url}/v1`, model: 'rkllm-test', toolMode: 'markers' as const, ...common },
    no: { provider: 'openai' as const, baseUrl: `${llm.url}/v1`, model: 'plain-test', toolMode: 'none' as const, ...common },
    ge: { provider: 'gemini' as const, baseUrl: llm.url, model: 'gemini-test', ...common },
  };
}

export interface TurnSse {
  status: number;
  events: AsyncQueue<{ event: string; data: Record<string, unknown> }>;
  /** Resolves when the server ended the stream. */
  ended: Promise<void>;
  abort(): void;
}

/** POST /v1/assistant/chat with stream: true, read as server-sent events. */
export async function chatStream(t: TestGateway, body: Record<string, unknown>, apiKey = TEST_API_KEY): Promise<TurnSse> {
  const ac = new AbortController();
  const res = await fetch(`${t.baseUrl}/v1/assistant/chat`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ ...body, stream: true }),
    signal: ac.signal,
  });
  const events = new AsyncQueue<{ event: string; data: Record<string, unknown> }>();
  const ended = (async () => {
    if (!res.body) return;
    const decoder = new TextDecoder();
    let buf = '';
    try {
      for await (const chunk of res.body) {
        buf += decoder.decode(chunk as Uint8Array, { stream: true });
        let i: number;
        while ((i = buf.indexOf('\n\n')) !== -1) {
          const frame = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const event = /^event: (.*)$/m.exec(frame)?.[1];
          const data = /^data: (.*)$/m.exec(frame)?.[1];
          if (event && data) events.push({ event, data: JSON.parse(data) as Record<string, unknown> });
        }
      }
    } catch {
      /* aborted */
    }
  })();
  return { status: res.status, events, ended, abort: () => ac.abort() };
}

/** Take events until one of `type` arrives; returns all taken, the match last. */
export async function until(s: TurnSse, type: string, timeoutMs = 15_000): Promise<Array<{ event: string; data: Record<string, unknown> }>> {
  const out: Array<{ event: string; data: Record<string, unknown> }> = [];
  for (;;) {
    const e = await s.events.next(timeoutMs, `SSE event ${type}`);
    out.push(e);
    if (e.event === type) return out;
  }
}

/** The tool-result messages of a recorded OpenAI request. */
export function openAiToolMessages(body: Record<string, unknown>): Array<{ tool_call_id: string; content: string }> {
  return (body['messages'] as Array<{ role: string; tool_call_id: string; content: string }>).filter((m) => m.role === 'tool');
}
