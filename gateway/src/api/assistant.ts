import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Assistant, ChatRequest } from '../assistant/assistant.js';
import type { TurnEvent } from '../assistant/turn-types.js';
import { GatewayError } from '../errors.js';
import { TokensSchema } from '../hub/credentials.js';
import type { Metrics } from '../metrics.js';
import { answerOf, cancelOnDisconnect, failure, openTurnSse, tokensOf } from './turn-http.js';
import { chatCompletionRoutes } from './chat-completions.js';
import { problems } from './route-helpers.js';
import { jsonSchema } from './schemas.js';
import { SseAnswers, sseEvent } from './sse-writer.js';

/** The assistant over HTTP: a turn (JSON or SSE), conversations, confirmations, cancellation. */
const Id = z.string().min(1).max(64);

export function chatBody(maxMessageBytes: number) {
  return z
    .object({
      message: z.string().min(1).max(maxMessageBytes).optional(),
      conversationId: Id.optional(),
      deviceId: z.string().max(64).optional().describe('Bind the turn to a device: its tools come first, under short names'),
      model: z.string().max(64).optional().describe('An assistant model name (GET /v1/assistant/models); default assistant.defaultModel'),
      prompt: z
        .object({ name: z.string().min(1).max(64), arguments: z.record(z.string().max(256), z.string().max(maxMessageBytes)).optional() })
        .strict()
        .optional(),
      resources: z.array(z.string().min(1).max(4096)).max(16).optional(),
      tokens: TokensSchema.optional(),
      stream: z.boolean().optional(),
    })
    .strict()
    .refine((b) => b.message !== undefined || b.prompt !== undefined, 'give a message, a prompt, or both');
}

const ToolCallOut = z.object({
  callId: z.string(),
  name: z.string(),
  arguments: z.record(z.string(), z.unknown()),
  isError: z.boolean(),
  durationMs: z.number(),
});
const ChatOut = z.object({
  conversationId: z.string(),
  turnId: z.string(),
  text: z.string(),
  toolCalls: z.array(ToolCallOut),
  rounds: z.number().int(),
  usage: z.object({ inputTokens: z.number().int(), outputTokens: z.number().int() }),
});
const ConversationOut = z.object({
  id: z.string(),
  messages: z.array(z.object({ role: z.enum(['user', 'assistant']), content: z.string(), at: z.string() })),
  createdAt: z.string(),
  updatedAt: z.string(),
});
const IdParam = z.object({ id: Id });
const ConfirmParams = z.object({ turnId: Id, callId: z.string().min(1).max(128) });
const ConfirmBody = z.object({ approve: z.boolean() }).strict();

// eslint-disable-next-line max-lines-per-function -- a route table: each route's schema is declarative data, its handler a few lines
export async function assistantRoutes(
  app: FastifyInstance,
  o: { assistant: Assistant; maxMessageBytes: number; metrics: Metrics; /** events.maxBufferedBytes */ maxUnreadBytes: number; writeTimeoutMs: number },
): Promise<void> {
  const { assistant } = o;
  const caller = (req: FastifyRequest) => req.caller ?? {};
  const ChatBody = chatBody(o.maxMessageBytes);
  const answers = new SseAnswers({ maxUnreadBytes: o.maxUnreadBytes, writeTimeoutMs: o.writeTimeoutMs, metrics: o.metrics, log: app.log });
  await app.register(chatCompletionRoutes, { assistant, maxMessageBytes: o.maxMessageBytes, answers });

  app.get('/v1/assistant/models', {
    schema: {
      tags: ['assistant'],
      summary: 'The assistant models configured (assistant.models)',
      response: {
        200: jsonSchema(
          z.object({ models: z.array(z.object({ name: z.string(), provider: z.string(), toolMode: z.string(), default: z.boolean() })) }),
          'output',
        ),
        ...problems(401),
      },
    },
    handler: async () => ({ models: assistant.modelList() }),
  });

  app.post<{ Body: z.infer<typeof ChatBody> }>('/v1/assistant/chat', {
    schema: {
      tags: ['assistant'],
      summary: 'One assistant turn: the model runs tools of devices and hosted servers until it answers. stream: true answers as text/event-stream',
      body: jsonSchema(ChatBody),
      response: {
        200: {
          ...jsonSchema(ChatOut, 'output'),
          description:
            'the answer; with stream: true, SSE events turn.started, tool.call, tool.result, resource.read, confirmation.required, text.delta, turn.completed / turn.failed (a caller that leaves more than events.maxBufferedBytes unread is cut and its turn cancelled)',
        },
        ...problems(400, 401, 404, 409, 429, 502, 503, 504),
      },
    },
    handler: async (req, reply) => {
      const b = req.body;
      const chat: ChatRequest = {
        message: b.message,
        conversationId: b.conversationId,
        deviceId: b.deviceId,
        model: b.model,
        prompt: b.prompt,
        resources: b.resources,
        tokens: tokensOf(req, b),
      };
      if (!b.stream) {
        const started = await assistant.start(chat, caller(req), { stream: false, interactive: false, emit: () => undefined });
        cancelOnDisconnect(reply, () => started.turn.cancel('the caller disconnected'));
        return answerOf(started.done);
      }
      // Checks that fail before the turn starts are plain problem+json; from turn.started on, events.
      const queued: TurnEvent[] = [];
      let write = (e: TurnEvent): void => void queued.push(e);
      const started = await assistant.start(chat, caller(req), { stream: true, interactive: true, emit: (e) => write(e) });
      const out = openTurnSse(answers, reply, started.turn);
      const send = (event: string, data: unknown) => out.write(sseEvent(event, data));
      for (const e of queued) send(e.type, e);
      write = (e) => void send(e.type, e);
      cancelOnDisconnect(reply, () => started.turn.cancel('the caller disconnected'));
      try {
        const r = await started.done;
        send('turn.completed', { type: 'turn.completed', ...r });
      } catch (e) {
        const f = failure(e);
        send('turn.failed', { type: 'turn.failed', turnId: started.turn.id, code: f.code, detail: f.detail });
      }
      out.end();
    },
  });

  app.get<{ Params: z.infer<typeof IdParam> }>('/v1/assistant/conversations/:id', {
    schema: {
      tags: ['assistant'],
      summary: "A conversation's messages (the user's and the final answers)",
      params: jsonSchema(IdParam),
      response: { 200: jsonSchema(ConversationOut, 'output'), ...problems(401, 404) },
    },
    handler: async (req) => {
      const c = assistant.conversation(req.params.id, caller(req));
      if (!c) throw new GatewayError('NOT_FOUND', 'no such conversation (it may have expired)');
      return { id: c.id, messages: c.messages, createdAt: new Date(c.createdAt).toISOString(), updatedAt: new Date(c.updatedAt).toISOString() };
    },
  });

  app.delete<{ Params: z.infer<typeof IdParam> }>('/v1/assistant/conversations/:id', {
    schema: {
      tags: ['assistant'],
      summary: 'Forget a conversation',
      params: jsonSchema(IdParam),
      response: { 204: { type: 'null', description: 'deleted' }, ...problems(401, 404) },
    },
    handler: async (req, reply) => {
      if (!assistant.forget(req.params.id, caller(req))) throw new GatewayError('NOT_FOUND', 'no such conversation (it may have expired)');
      return reply.code(204).send();
    },
  });

  app.delete<{ Params: z.infer<typeof IdParam> }>('/v1/assistant/turns/:id', {
    schema: {
      tags: ['assistant'],
      summary: 'Cancel a running turn: the model request and every tool call in flight are aborted',
      params: jsonSchema(IdParam),
      response: { 204: { type: 'null', description: 'cancelled' }, ...problems(401, 404) },
    },
    handler: async (req, reply) => {
      assistant.turn(req.params.id, caller(req)).cancel('cancelled by the caller');
      return reply.code(204).send();
    },
  });

  app.post<{ Params: z.infer<typeof ConfirmParams>; Body: z.infer<typeof ConfirmBody> }>('/v1/assistant/turns/:turnId/confirmations/:callId', {
    schema: {
      tags: ['assistant'],
      summary: 'Answer a confirmation.required event: approve runs the tool, anything else tells the model the person declined',
      params: jsonSchema(ConfirmParams),
      body: jsonSchema(ConfirmBody),
      response: { 204: { type: 'null', description: 'recorded' }, ...problems(400, 401, 404) },
    },
    handler: async (req, reply) => {
      if (!assistant.turn(req.params.turnId, caller(req)).confirm(req.params.callId, req.body.approve))
        throw new GatewayError('NOT_FOUND', 'no confirmation is pending with this id');
      return reply.code(204).send();
    },
  });
}
