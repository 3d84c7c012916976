import { FunctionCallingConfigMode, GoogleGenAI, type Content, type GenerateContentResponse, type Part } from '@google/genai';
import { checkFinished } from '../reply-bounds.js';
import type { ChatMessage, ModelProvider, ModelReply, ModelRequest, ToolCallRequest } from '../types.js';
import type { ProviderOptions } from './index.js';

/** Google Gemini (generateContent with function calling) through the official `@google/genai` SDK. */
export class GeminiProvider implements ModelProvider {
  private readonly client: GoogleGenAI;

  constructor(private readonly o: ProviderOptions) {
    this.client = new GoogleGenAI({
      apiKey: o.apiKey ?? 'none',
      httpOptions: {
        ...(o.baseUrl ? { baseUrl: o.baseUrl } : {}),
        ...(o.fetch ? { fetch: o.fetch } : {}),
        timeout: o.timeoutMs,
        retryOptions: { attempts: o.maxRetries + 1 },
      },
    });
  }

  async complete(req: ModelRequest): Promise<ModelReply> {
    const params = {
      model: this.o.model,
      contents: toContents(req.messages),
      config: {
        systemInstruction: req.system,
        maxOutputTokens: this.o.maxTokens,
        abortSignal: req.signal,
        ...(req.tools.length
          ? {
              tools: [{ functionDeclarations: req.tools.map((t) => ({ name: t.name, description: t.description, parametersJsonSchema: t.parameters })) }],
              toolConfig: { functionCallingConfig: { mode: req.toolChoice === 'none' ? FunctionCallingConfigMode.NONE : FunctionCallingConfigMode.AUTO } },
            }
          : {}),
      },
    };
    const reply: ModelReply = { text: '', toolCalls: [], usage: { inputTokens: 0, outputTokens: 0 } };
    let finished = false;
    const take = (r: GenerateContentResponse, onText?: (d: string) => void) => {
      // A prompt Gemini blocks is answered by promptFeedback alone, no candidate: finished too.
      if (r.candidates?.[0]?.finishReason !== undefined || r.promptFeedback?.blockReason !== undefined) finished = true;
      for (const p of r.candidates?.[0]?.content?.parts ?? []) {
        if (typeof p.text === 'string' && !p.thought) {
          reply.text += p.text;
          onText?.(p.text);
        }
        if (p.functionCall) reply.toolCalls.push(toCall(p, reply.toolCalls.length));
      }
      // Usage is cumulative per response; the last chunk carries the totals.
      if (r.usageMetadata) reply.usage = { inputTokens: r.usageMetadata.promptTokenCount ?? 0, outputTokens: r.usageMetadata.candidatesTokenCount ?? 0 };
    };
    if (req.onText) {
      for await (const chunk of await this.client.models.generateContentStream(params)) take(chunk, req.onText);
      checkFinished(finished, req.signal, 'no finishReason');
    } else take(await this.client.models.generateContent(params));
    return reply;
  }
}

function toCall(p: Part, i: number): ToolCallRequest {
  const c = p.functionCall!;
  const call: ToolCallRequest = { id: c.id ?? `gcall_${i}`, name: c.name ?? '', arguments: c.args ?? {} };
  if (p.thoughtSignature) call.signature = p.thoughtSignature;
  return call;
}

/** Assistant turns are `model` contents; tool results are `user` contents of functionResponse parts (consecutive ones together). */
function toContents(messages: ChatMessage[]): Content[] {
  const out: Content[] = [];
  for (const m of messages) {
    if (m.role === 'tool') {
      const part: Part = {
        functionResponse: {
          ...(m.toolCallId.startsWith('gcall_') ? {} : { id: m.toolCallId }),
          name: m.name,
          response: m.isError ? { error: m.content } : { output: m.content },
        },
      };
      const last = out[out.length - 1];
      if (last?.role === 'user' && last.parts?.every((p) => p.functionResponse)) last.parts.push(part);
      else out.push({ role: 'user', parts: [part] });
    } else if (m.role === 'user')
      out.push({ role: 'user', parts: [...(m.images ?? []).map((i) => ({ inlineData: { mimeType: i.mimeType, data: i.data } })), { text: m.content }] });
    else {
      const parts: Part[] = [];
      if (m.content) parts.push({ text: m.content });
      for (const c of m.toolCalls ?? [])
        parts.push({
          functionCall: { ...(c.id.startsWith('gcall_') ? {} : { id: c.id }), name: c.name, args: c.arguments },
          ...(c.signature ? { thoughtSignature: c.signature } : {}),
        });
      out.push({ role: 'model', parts: parts.length ? parts : [{ text: '' }] });
    }
  }
  return out;
}
