import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Assistant } from '../assistant/assistant.js';
import type { TurnEvent } from '../assistant/turn-types.js';
import { GatewayError } from '../errors.js';
import { answerOf, cancelOnDisconnect, failure, openTurnSse, tokensOf } from './turn-http.js';
import { Problem, jsonSchema } from './schemas.js';
import { sseEvent, type SseAnswers } from './sse-writer.js';
import { problems } from './route-helpers.js';

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
    tools: z.array(z.unknown()).max(512).optional(),
    tool_choice: z.unknown().optional(),
  })
  .loose();

/** OpenAI's model object: what the openai SDK's `models.list()` and chat UIs' model pickers read. */
const OpenAiModel = z.object({ id: z.string(), object: z.literal('model'), created: z.number().int(), owned_by: z.string() });
const ModelId = z.object({ id: z.string().min(1).max(64) });

/**
 * Client-side tools cannot be honoured: the assistant runs the fleet's tools here and returns only text.
 * Saying so beats ignoring them (a client that sent `tool_choice: "required"` would wait for a call forever).
 */
function refuseClientTools(b: { tools?: unknown[] | undefined; tool_choice?: unknown }): void {
  if (b.tools?.length)
    throw new GatewayError(
      'INVALID_REQUEST',
      "client-side `tools` are not supported: the assistant runs the gateway's device and hosted-server tools itself and returns only text; send the request without `tools`",
    );
  const choice = b.tool_choice;
  if (choice !== undefined && choice !== null && choice !== 'auto' && choice !== 'none')
    throw new GatewayError(
      'INVALID_REQUEST',
      `tool_choice ${JSON.stringify(choice).slice(0, 80)} is not supported: the gateway chooses and runs its own tools; use "auto" or leave it out`,
    );
}

function textOf(content: unknown): string {
  const c = Content.safeParse(content);
  if (!c.success) throw new GatewayError('INVALID_REQUEST', 'a message content must be a string or an array of {type: "text", text} parts');
  return typeof c.data === 'string' ? c.data : (c.data ?? []).map((p) => (p.type === 'text' && typeof p.text === 'string' ? p.text : '')).join('');
}

// eslint-disable-next-line max-lines-per-function -- a route table: each route's schema is declarative data, its handler a few lines
export async function chatCompletionRoutes(app: FastifyInstance, o: { assistant: Assistant; maxMessageBytes: number; answers: SseAnswers }): Promise<void> {
  // OpenAI clients read errors from JSON `{error: {message}}`: the problem+json fields stay, with that added.
  app.addHook('onSend', async (_req, reply, payload) => {
    if (!String(reply.getHeader('content-type') ?? '').startsWith('application/problem+json') || typeof payload !== 'string') return payload;
    const p = JSON.parse(payload) as { detail?: string; code?: string };
    void reply.header('content-type', 'application/json; charset=utf-8');
    return JSON.stringify({ ...p, error: { message: p.detail, type: 'invalid_request_error', code: p.code } });
  });
  // Every model "exists" since the gateway started: a stable `created` for clients that sort by it.
  const listedSince = Math.floor(Date.now() / 1000);
  const modelObject = (m: { name: string; provider: string }): z.infer<typeof OpenAiModel> => ({
    id: m.name,
    object: 'model',
    created: listedSince,
    owned_by: m.provider,
  });
  app.get('/v1/models', {
    schema: {
      tags: ['assistant'],
      summary: 'OpenAI-compatible model list: the assistant models (assistant.models), for OpenAI clients and chat UIs',
      response: { 200: jsonSchema(z.object({ object: z.literal('list'), data: z.array(OpenAiModel) }), 'output') },
    },
    handler: async () => ({ object: 'list' as const, data: o.assistant.modelList().map(modelObject) }),
  });
  app.get<{ Params: z.infer<typeof ModelId> }>('/v1/models/:id', {
    schema: {
      tags: ['assistant'],
      summary: "One assistant model in OpenAI's shape",
      params: jsonSchema(ModelId),
      response: { 200: jsonSchema(OpenAiModel, 'output'), 404: { ...jsonSchema(Problem, 'output') } },
    },
    handler: async (req) => {
      const m = o.assistant.modelList().find((x) => x.name === req.params.id);
      if (!m) throw new GatewayError('MODEL_NOT_FOUND', `no assistant model "${req.params.id}" (GET /v1/models lists them)`);
      return modelObject(m);
    },
  });
  app.post<{ Body: z.infer<typeof Body> }>('/v1/chat/completions', {
    schema: {
      tags: ['assistant'],
      summary: 'OpenAI-compatible chat completions: the assistant runs the tools of devices and hosted servers; only text comes back',
      body: jsonSchema(Body),
      response: {
        200: {
          description:
            'a chat.completion object, or with stream: true chat.completion.chunk events (a caller that leaves more than events.maxBufferedBytes unread is cut and its turn cancelled)',
          type: 'object',
          additionalProperties: true,
        },
        // As /v1/assistant/chat's: a busy model service (MODEL_BUSY, 503 with Retry-After) and the turn bounds.
        ...problems(400, 401, 404, 409, 429, 502, 503, 504),
      },
    },
    handler: async (req: FastifyRequest<{ Body: z.infer<typeof Body> }>, reply) => {
      const b = req.body;
      refuseClientTools(b);
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
      const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
        id,
        object: 'chat.completion.chunk',
        created,
        model: b.model,
        choices: [{ index: 0, delta, finish_reason: finish }],
      });
      let write: (e: TurnEvent) => void = (e) => {
        if (e.type === 'turn.started') conversationId = e.conversationId;
      };
      const started = await o.assistant.start({ message: last.content, history, system, model: b.model, tokens: tokensOf(req) }, req.caller ?? {}, {
        stream: b.stream === true,
        interactive: false,
        emit: (e) => write(e),
      });
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
      // No heartbeat: OpenAI's stream has no comments, and some clients of it may not expect them.
      const out = openTurnSse(o.answers, reply, started.turn, false);
      const send = (data: unknown) => out.write(sseEvent(undefined, data));
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
          send({
            id,
            object: 'chat.completion.chunk',
            created,
            model: b.model,
            choices: [],
            usage: { prompt_tokens: r.usage.inputTokens, completion_tokens: r.usage.outputTokens, total_tokens: r.usage.inputTokens + r.usage.outputTokens },
          });
      } catch (e) {
        const f = failure(e);
        send({ error: { message: f.detail, type: 'server_error', code: f.code } });
      } finally {
        forget();
      }
      send('[DONE]');
      out.end();
    },
  });
}
