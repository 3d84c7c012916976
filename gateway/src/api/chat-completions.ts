import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Assistant } from '../assistant/assistant.js';
import type { TurnEvent } from '../assistant/turn.js';
import { GatewayError } from '../errors.js';
import { answerOf, cancelOnDisconnect, failure, tokensOf } from './turn-http.js';
import { Problem, jsonSchema } from './schemas.js';

/**
 * OpenAI-compatible Chat Completions: any OpenAI-compatible chat UI gets the fleet's tools, run here,
 * server-side; only text comes back. Stateless, like the API it imitates: the caller sends the history.
 */
const Part = z.object({ type: z.string().max(64), text: z.string().optional() }).loose();
const Content = z.union([z.string(), z.array(Part).max(64), z.null()]).optional();
// Content is checked in the handler: fastify's type coercion mangles a union of string and array.
const Message = z.object({ role: z.enum(['system', 'developer', 'user', 'assistant', 'tool']), content: z.unknown() }).loose();
const Body = z
  .object({
    model: z.string().min(1).max(64).describe('An assistant model name (GET /v1/assistant/models)'),
    messages: z.array(Message).min(1).max(500),
    stream: z.boolean().optional(),
    stream_options: z.object({ include_usage: z.boolean().optional() }).loose().optional(),
  })
  .loose();

function textOf(content: unknown): string {
  const c = Content.safeParse(content);
  if (!c.success) throw new GatewayError('INVALID_REQUEST', 'a message content must be a string or an array of {type: "text", text} parts');
  return typeof c.data === 'string' ? c.data : (c.data ?? []).map((p) => (p.type === 'text' && typeof p.text === 'string' ? p.text : '')).join('');
}

export async function chatCompletionRoutes(app: FastifyInstance, o: { assistant: Assistant; maxMessageBytes: number }): Promise<void> {
  // OpenAI clients read errors from JSON `{error: {message}}`: the problem+json fields stay, with that added.
  app.addHook('onSend', async (_req, reply, payload) => {
    if (!String(reply.getHeader('content-type') ?? '').startsWith('application/problem+json') || typeof payload !== 'string') return payload;
    const p = JSON.parse(payload) as { detail?: string; code?: string };
    void reply.header('content-type', 'application/json; charset=utf-8');
    return JSON.stringify({ ...p, error: { message: p.detail, type: 'invalid_request_error', code: p.code } });
  });
  app.post<{ Body: z.infer<typeof Body> }>('/v1/chat/completions', {
    schema: {
      tags: ['assistant'],
      summary: 'OpenAI-compatible chat completions: the assistant runs the tools of devices and hosted servers; only text comes back',
      body: jsonSchema(Body),
      response: { 200: { description: 'a chat.completion object, or with stream: true chat.completion.chunk events', type: 'object', additionalProperties: true }, 400: { ...jsonSchema(Problem, 'output') }, 404: { ...jsonSchema(Problem, 'output') } },
    },
    handler: async (req: FastifyRequest<{ Body: z.infer<typeof Body> }>, reply) => {
      const b = req.body;
      const system: string[] = [];
      const history: Array<{ role: 'user' | 'assistant'; content: string }> = [];
      for (const m of b.messages) {
        const text = textOf(m.content);
        if (text.length > o.maxMessageBytes) throw new GatewayError('INVALID_REQUEST', `a message is longer than ${o.maxMessageBytes} characters`);
        if (m.role === 'system' || m.role === 'developer') system.push(text);
        else if (m.role === 'user' || m.role === 'assistant') history.push({ role: m.role, content: text });
        // client-side tool results have no place here: the tools run in the gateway
      }
      const last = history.pop();
      if (last?.role !== 'user' || !last.content) throw new GatewayError('INVALID_REQUEST', 'the last message must be a user message with text');
      const id = `chatcmpl-${randomUUID()}`;
      const created = Math.floor(Date.now() / 1000);
      let conversationId: string | undefined;
      const forget = () => conversationId && o.assistant.forget(conversationId, req.caller ?? {});
      const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({ id, object: 'chat.completion.chunk', created, model: b.model, choices: [{ index: 0, delta, finish_reason: finish }] });
      let write: (e: TurnEvent) => void = (e) => {
        if (e.type === 'turn.started') conversationId = e.conversationId;
      };
      const started = await o.assistant.start({ message: last.content, history, system, model: b.model, tokens: tokensOf(req) }, req.caller ?? {}, { stream: b.stream === true, interactive: false, emit: (e) => write(e) });
      cancelOnDisconnect(reply, () => started.turn.cancel('the caller disconnected'));
      if (!b.stream) {
        try {
          const r = await answerOf(started.done);
          return {
            id,
            object: 'chat.completion',
            created,
            model: b.model,
            choices: [{ index: 0, message: { role: 'assistant', content: r.text, refusal: null }, finish_reason: 'stop', logprobs: null }],
            usage: { prompt_tokens: r.usage.inputTokens, completion_tokens: r.usage.outputTokens, total_tokens: r.usage.inputTokens + r.usage.outputTokens },
          };
        } finally {
          forget();
        }
      }
      reply.hijack();
      const res = reply.raw;
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache, no-transform', connection: 'keep-alive', 'x-accel-buffering': 'no' });
      const send = (data: unknown) => !res.destroyed && res.write(`data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
      send(chunk({ role: 'assistant', content: '' }));
      // Text streams as the model writes it; words said before a tool round are kept apart from the next round's.
      let round = 0;
      write = (e) => {
        if (e.type !== 'text.delta') return;
        if (round && e.round !== round) send(chunk({ content: '\n\n' }));
        round = e.round;
        send(chunk({ content: e.text }));
      };
      try {
        const r = await started.done;
        if (!round && r.text) send(chunk({ content: r.text }));
        send(chunk({}, 'stop'));
        if (b.stream_options?.include_usage)
          send({ id, object: 'chat.completion.chunk', created, model: b.model, choices: [], usage: { prompt_tokens: r.usage.inputTokens, completion_tokens: r.usage.outputTokens, total_tokens: r.usage.inputTokens + r.usage.outputTokens } });
      } catch (e) {
        const f = failure(e);
        send({ error: { message: f.detail, type: 'server_error', code: f.code } });
      } finally {
        forget();
      }
      send('[DONE]');
      res.end();
    },
  });
}
