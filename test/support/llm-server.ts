import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A scripted LLM server speaking the real wire formats — OpenAI Chat Completions (JSON, and SSE chunks
 * with tool-call deltas), Anthropic Messages (JSON, and SSE events with tool_use blocks) and Gemini
 * generateContent (JSON, and SSE chunks with functionCall parts) — so the
 * gateway's own SDK clients talk to it exactly as to the real services. Each request gets the next reply
 * from the script (a function of the request), and every request is recorded.
 */

export interface ScriptedCall {
  name: string;
  arguments: Record<string, unknown> | string;
  id?: string;
}

export interface ScriptedReply {
  text?: string;
  toolCalls?: ScriptedCall[];
  usage?: { input: number; output: number };
  /** Answer with this HTTP status and error body instead. */
  status?: number;
  error?: string;
  /**
   * Reasoning before the answer, in these pieces, as each API carries it: OpenAI-compatible `reasoning_content` (as
   * DeepSeek, vLLM and llama.cpp send it), an Anthropic thinking block, Gemini `thought` parts.
   */
  reasoning?: string[];
  /** Stream these text pieces (default: the text in 3-character pieces). */
  chunks?: string[];
  /** Before answering (or, when streaming, after the first chunk), wait for this. */
  hold?: Promise<void>;
  /** Never answer: hold the connection until the client goes away. */
  hang?: boolean;
  /** Streaming: after the text chunks, neither finish nor end: hold the stream open until the client goes away (a model still talking). */
  holdOpen?: boolean;
  /**
   * Streaming: end the stream after the text and the tool calls, before the model's finish (no finish_reason and no
   * [DONE]; no message_delta or message_stop; no finishReason): a server or a connection that died mid-reply.
   */
  cut?: boolean;
  /** Streaming: the size of the pieces a tool call's arguments arrive in (default 5). */
  argChunk?: number;
  /** Answer 200 with this body as it is (a broken or hostile server), with the content type its request expects; then end, or hold open with holdOpen. */
  raw?: string;
}

export interface RecordedRequest {
  api: 'openai' | 'anthropic' | 'gemini';
  stream: boolean;
  body: Record<string, unknown>;
  /** The system prompt (OpenAI: the system messages joined). */
  system: string;
  /** Tool names offered. */
  tools: string[];
  toolChoice: unknown;
  /** Resolves when the client closed the connection before the reply ended. */
  aborted: Promise<void>;
  headers: IncomingMessage['headers'];
}

export type Script = (req: RecordedRequest, index: number) => ScriptedReply | Promise<ScriptedReply>;

export interface LlmServer {
  url: string;
  requests: RecordedRequest[];
  /** Replace the script (each request asks it for the reply; the index counts from this call). */
  script(s: Script | ScriptedReply[]): void;
  /** Connections currently open (0: nothing left running). */
  openConnections(): number;
  /** The most requests open at once so far: the concurrency the server saw. */
  peakOpen(): number;
  close(): Promise<void>;
}

export async function startLlmServer(initial: Script | ScriptedReply[] = []): Promise<LlmServer> {
  let script: Script = toScript(initial);
  const requests: RecordedRequest[] = [];
  let open = 0;
  let peak = 0;
  // Replies are numbered from the last script() call.
  let served = 0;
  let base = 0;
  const server: Server = createServer((req, res) => {
    peak = Math.max(peak, ++open);
    res.on('close', () => open--);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void handle(req, res, Buffer.concat(chunks).toString('utf8')).catch((e: unknown) => {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: String(e) } }));
      });
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse, raw: string): Promise<void> {
    const body = JSON.parse(raw) as Record<string, unknown>;
    const url = req.url ?? '';
    const api = url.endsWith('/messages') ? 'anthropic' : url.includes('enerateContent') ? 'gemini' : 'openai';
    let onAbort!: () => void;
    const aborted = new Promise<void>((resolve) => (onAbort = resolve));
    res.on('close', () => {
      if (!res.writableFinished) onAbort();
    });
    if (api === 'gemini') return handleGemini(req, res, body, aborted);
    const tools = ((body['tools'] ?? []) as Array<Record<string, unknown>>).map((t) =>
      String(api === 'openai' ? (t['function'] as { name: string }).name : t['name']),
    );
    const system =
      api === 'anthropic'
        ? String(body['system'] ?? '')
        : ((body['messages'] ?? []) as Array<{ role: string; content: unknown }>)
            .filter((m) => m.role === 'system')
            .map((m) => String(m.content))
            .join('\n');
    const rec: RecordedRequest = { api, stream: body['stream'] === true, body, system, tools, toolChoice: body['tool_choice'], aborted, headers: req.headers };
    requests.push(rec);
    const reply = await script(rec, served++ - base);
    if (reply.hang) {
      await aborted;
      return;
    }
    if (reply.status) {
      if (reply.hold) await reply.hold;
      const err =
        api === 'anthropic'
          ? { type: 'error', error: { type: 'invalid_request_error', message: reply.error ?? 'error' } }
          : { error: { message: reply.error ?? 'error', type: 'invalid_request_error', code: null } };
      res.writeHead(reply.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(err));
      return;
    }
    if (reply.raw !== undefined) return sendRaw(res, rec.stream, reply, aborted);
    const calls = (reply.toolCalls ?? []).map((c, i) => ({
      id: c.id ?? `call_${requests.length}_${i}`,
      name: c.name,
      args: typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments),
    }));
    const text = reply.text ?? '';
    const pieces = reply.chunks ?? text.match(/[\s\S]{1,3}/g) ?? [];
    const usage = reply.usage ?? { input: 10, output: 5 };
    const model = String(body['model']);
    if (!rec.stream) {
      if (reply.hold) await reply.hold;
      res.writeHead(200, { 'content-type': 'application/json' });
      const reasoning = reply.reasoning?.join('');
      res.end(JSON.stringify(api === 'openai' ? openAiJson(model, text, calls, usage, reasoning) : anthropicJson(model, text, calls, usage, reasoning)));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const send = (data: unknown, event?: string) =>
      res.write(`${event ? `event: ${event}\n` : ''}data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
    if (api === 'openai') {
      const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
        id: 'chatcmpl-1',
        object: 'chat.completion.chunk',
        created: 1,
        model,
        choices: [{ index: 0, delta, finish_reason: finish }],
      });
      send(chunk({ role: 'assistant', content: '' }));
      for (const p of reply.reasoning ?? []) send(chunk({ reasoning_content: p }));
      for (const [k, p] of pieces.entries()) {
        send(chunk({ content: p }));
        if (k === 0 && reply.hold) await reply.hold;
      }
      if (!pieces.length && reply.hold) await reply.hold;
      if (reply.holdOpen) return void (await aborted);
      calls.forEach((c, i) => {
        send(chunk({ tool_calls: [{ index: i, id: c.id, type: 'function', function: { name: c.name, arguments: '' } }] }));
        // arguments arrive split, as the real service sends them
        for (const part of pieced(c.args, reply.argChunk)) send(chunk({ tool_calls: [{ index: i, function: { arguments: part } }] }));
      });
      if (reply.cut) return void res.end();
      send(chunk({}, calls.length ? 'tool_calls' : 'stop'));
      if ((body['stream_options'] as { include_usage?: boolean } | undefined)?.include_usage)
        send({
          id: 'chatcmpl-1',
          object: 'chat.completion.chunk',
          created: 1,
          model,
          choices: [],
          usage: { prompt_tokens: usage.input, completion_tokens: usage.output, total_tokens: usage.input + usage.output },
        });
      send('[DONE]');
    } else {
      send(
        {
          type: 'message_start',
          message: {
            id: 'msg_1',
            type: 'message',
            role: 'assistant',
            content: [],
            model,
            stop_reason: null,
            stop_sequence: null,
            usage: { input_tokens: usage.input, output_tokens: 1 },
          },
        },
        'message_start',
      );
      let index = 0;
      if (reply.reasoning) {
        send({ type: 'content_block_start', index, content_block: { type: 'thinking', thinking: '', signature: '' } }, 'content_block_start');
        for (const p of reply.reasoning) send({ type: 'content_block_delta', index, delta: { type: 'thinking_delta', thinking: p } }, 'content_block_delta');
        send({ type: 'content_block_delta', index, delta: { type: 'signature_delta', signature: 'sig' } }, 'content_block_delta');
        send({ type: 'content_block_stop', index }, 'content_block_stop');
        index++;
      }
      if (pieces.length || !calls.length) {
        send({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } }, 'content_block_start');
        for (const [k, p] of pieces.entries()) {
          send({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: p } }, 'content_block_delta');
          if (k === 0 && reply.hold) await reply.hold;
        }
        if (reply.holdOpen) return void (await aborted);
        send({ type: 'content_block_stop', index }, 'content_block_stop');
        index++;
      }
      for (const c of calls) {
        send({ type: 'content_block_start', index, content_block: { type: 'tool_use', id: c.id, name: c.name, input: {} } }, 'content_block_start');
        for (const part of pieced(c.args, reply.argChunk))
          send({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: part } }, 'content_block_delta');
        send({ type: 'content_block_stop', index }, 'content_block_stop');
        index++;
      }
      if (reply.cut) return void res.end();
      send(
        { type: 'message_delta', delta: { stop_reason: calls.length ? 'tool_use' : 'end_turn', stop_sequence: null }, usage: { output_tokens: usage.output } },
        'message_delta',
      );
      send({ type: 'message_stop' }, 'message_stop');
    }
    res.end();
  }

  /** Gemini: POST /v1beta/models/{model}:generateContent, or :streamGenerateContent?alt=sse. */
  async function handleGemini(req: IncomingMessage, res: ServerResponse, body: Record<string, unknown>, aborted: Promise<void>): Promise<void> {
    const url = req.url ?? '';
    const model = /models\/([^:]+):/.exec(url)?.[1] ?? '';
    const decls = ((body['tools'] ?? []) as Array<{ functionDeclarations?: Array<{ name: string }> }>).flatMap((t) => t.functionDeclarations ?? []);
    const sys = body['systemInstruction'] as { parts?: Array<{ text?: string }> } | undefined;
    const rec: RecordedRequest = {
      api: 'gemini',
      stream: url.includes(':streamGenerateContent'),
      body,
      system: (sys?.parts ?? []).map((p) => p.text ?? '').join(''),
      tools: decls.map((d) => d.name),
      toolChoice: (body['toolConfig'] as { functionCallingConfig?: { mode?: string } } | undefined)?.functionCallingConfig?.mode,
      aborted,
      headers: req.headers,
    };
    requests.push(rec);
    const reply = await script(rec, served++ - base);
    if (reply.hang) return void (await aborted);
    if (reply.raw !== undefined) return sendRaw(res, rec.stream, reply, aborted);
    if (reply.status) {
      res.writeHead(reply.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { code: reply.status, message: reply.error ?? 'error', status: 'INVALID_ARGUMENT' } }));
      return;
    }
    const text = reply.text ?? '';
    const usage = reply.usage ?? { input: 10, output: 5 };
    const calls = (reply.toolCalls ?? []).map((c) => ({
      functionCall: { name: c.name, args: typeof c.arguments === 'string' ? (JSON.parse(c.arguments) as unknown) : c.arguments },
      thoughtSignature: `sig-${c.name}`,
    }));
    const usageMetadata = { promptTokenCount: usage.input, candidatesTokenCount: usage.output, totalTokenCount: usage.input + usage.output };
    const candidate = (parts: unknown[], finish?: string) => ({ content: { role: 'model', parts }, index: 0, ...(finish ? { finishReason: finish } : {}) });
    const thoughts = (reply.reasoning ?? []).map((p) => ({ text: p, thought: true }));
    if (!rec.stream) {
      if (reply.hold) await reply.hold;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ candidates: [candidate([...thoughts, ...(text ? [{ text }] : []), ...calls], 'STOP')], usageMetadata, modelVersion: model }));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const t of thoughts) res.write(`data: ${JSON.stringify({ candidates: [candidate([t])], modelVersion: model })}\r\n\r\n`);
    const pieces = reply.chunks ?? text.match(/[\s\S]{1,3}/g) ?? [];
    for (const [k, p] of pieces.entries()) {
      res.write(`data: ${JSON.stringify({ candidates: [candidate([{ text: p }])], modelVersion: model })}\r\n\r\n`);
      if (k === 0 && reply.hold) await reply.hold;
    }
    if (reply.holdOpen) return void (await aborted);
    // Cut: the calls come, but not the finish the last chunk of a whole reply carries.
    const last = reply.cut
      ? { candidates: [candidate(calls)], modelVersion: model }
      : { candidates: [candidate(calls.length ? calls : [{ text: '' }], 'STOP')], usageMetadata, modelVersion: model };
    if (!reply.cut || calls.length) res.write(`data: ${JSON.stringify(last)}\r\n\r\n`);
    res.end();
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    script(s) {
      script = toScript(s);
      base = served;
    },
    openConnections: () => open,
    peakOpen: () => peak,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A body as a broken or hostile server sends it: written as it is (in 64 KiB writes, as the client takes them). */
async function sendRaw(res: ServerResponse, stream: boolean, reply: ScriptedReply, aborted: Promise<void>): Promise<void> {
  res.writeHead(200, { 'content-type': stream ? 'text/event-stream' : 'application/json' });
  const raw = reply.raw ?? '';
  for (let at = 0; at < raw.length; at += 64 * 1024) {
    if (res.destroyed) return;
    if (!res.write(raw.slice(at, at + 64 * 1024))) await Promise.race([new Promise((resolve) => res.once('drain', resolve)), aborted]);
  }
  if (reply.holdOpen) return void (await aborted);
  res.end();
}

/** A tool call's arguments in pieces of `size` characters (default 5), as the real services split them. */
function pieced(args: string, size = 5): string[] {
  const out: string[] = [];
  for (let at = 0; at < args.length; at += size) out.push(args.slice(at, at + size));
  return out;
}

function toScript(s: Script | ScriptedReply[]): Script {
  if (typeof s === 'function') return s;
  return (_req, i) => s[i] ?? { text: `(the script has no reply #${i})` };
}

type Call = { id: string; name: string; args: string };

function openAiJson(model: string, text: string, calls: Call[], usage: { input: number; output: number }, reasoning?: string) {
  const message: Record<string, unknown> = { role: 'assistant', content: text || null, refusal: null };
  if (reasoning !== undefined) message['reasoning_content'] = reasoning;
  if (calls.length) message['tool_calls'] = calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.args } }));
  return {
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 1,
    model,
    choices: [{ index: 0, message, finish_reason: calls.length ? 'tool_calls' : 'stop', logprobs: null }],
    usage: { prompt_tokens: usage.input, completion_tokens: usage.output, total_tokens: usage.input + usage.output },
  };
}

function anthropicJson(model: string, text: string, calls: Call[], usage: { input: number; output: number }, reasoning?: string) {
  const content: unknown[] = [];
  if (reasoning !== undefined) content.push({ type: 'thinking', thinking: reasoning, signature: 'sig' });
  if (text) content.push({ type: 'text', text });
  for (const c of calls) content.push({ type: 'tool_use', id: c.id, name: c.name, input: JSON.parse(c.args) as unknown });
  return {
    id: 'msg_1',
    type: 'message',
    role: 'assistant',
    model,
    content,
    stop_reason: calls.length ? 'tool_use' : 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: usage.input, output_tokens: usage.output },
  };
}
