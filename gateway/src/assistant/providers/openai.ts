import OpenAI from 'openai';
import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import { checkFinished } from '../reply-bounds.js';
import { parseArguments, type ChatMessage, type ModelProvider, type ModelReply, type ModelRequest, type ToolCallRequest } from '../types.js';
import type { ProviderOptions } from './index.js';

/** OpenAI-compatible Chat Completions (OpenAI, Ollama, vLLM, llama.cpp server, LM Studio, DeepSeek, Qwen) through the official SDK. */
export class OpenAiProvider implements ModelProvider {
  private readonly client: OpenAI;

  constructor(private readonly o: ProviderOptions) {
    // Local servers (Ollama, vLLM) need no key, but the SDK insists on one.
    this.client = new OpenAI({
      apiKey: o.apiKey ?? 'none',
      baseURL: o.baseUrl ?? null,
      maxRetries: o.maxRetries,
      timeout: o.timeoutMs,
      ...(o.fetch ? { fetch: o.fetch } : {}),
    });
  }

  async complete(req: ModelRequest): Promise<ModelReply> {
    const body = {
      model: this.o.model,
      max_completion_tokens: this.o.maxTokens,
      messages: toMessages(req.system, req.messages),
      ...(req.tools.length ? { tools: req.tools.map(toTool), tool_choice: req.toolChoice } : {}),
    };
    if (!req.onText) {
      const r = await this.client.chat.completions.create({ ...body, stream: false }, { signal: req.signal });
      const msg = r.choices[0]?.message;
      return {
        text: msg?.content ?? '',
        toolCalls: (msg?.tool_calls ?? []).flatMap((c) => (c.type === 'function' ? [toCall(c.id, c.function.name, c.function.arguments)] : [])),
        usage: { inputTokens: r.usage?.prompt_tokens ?? 0, outputTokens: r.usage?.completion_tokens ?? 0 },
      };
    }
    const stream = await this.client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } }, { signal: req.signal });
    let text = '';
    const usage = { inputTokens: 0, outputTokens: 0 };
    // Tool calls arrive as deltas keyed by index: the first carries id and name, later ones append arguments.
    const calls = new Map<number, { id: string; name: string; args: string }>();
    let finished = false;
    for await (const chunk of stream) {
      // The usage chunk, when asked for, comes after the one with finish_reason; [DONE] is the SDK's, never seen here.
      const finish = chunk.choices[0]?.finish_reason;
      if (finish !== null && finish !== undefined) finished = true;
      if (chunk.usage) {
        usage.inputTokens = chunk.usage.prompt_tokens;
        usage.outputTokens = chunk.usage.completion_tokens;
      }
      const delta = chunk.choices[0]?.delta;
      if (!delta) continue;
      if (delta.content) {
        text += delta.content;
        req.onText(delta.content);
      }
      for (const tc of delta.tool_calls ?? []) {
        const c = calls.get(tc.index) ?? { id: '', name: '', args: '' };
        if (tc.id) c.id = tc.id;
        if (tc.function?.name) c.name += tc.function.name;
        if (tc.function?.arguments) c.args += tc.function.arguments;
        calls.set(tc.index, c);
      }
    }
    checkFinished(finished, req.signal, 'no finish_reason');
    const toolCalls = [...calls.entries()].sort(([a], [b]) => a - b).map(([i, c]) => toCall(c.id || `call_${i}`, c.name, c.args));
    return { text, toolCalls, usage };
  }
}

function toCall(id: string, name: string, raw: string): ToolCallRequest {
  const { args, error } = parseArguments(raw);
  return error ? { id, name, arguments: args, argumentsError: error } : { id, name, arguments: args };
}

function toTool(t: { name: string; description: string; parameters: Record<string, unknown> }): ChatCompletionTool {
  return { type: 'function', function: { name: t.name, description: t.description, parameters: t.parameters } };
}

function toMessages(system: string, messages: ChatMessage[]): ChatCompletionMessageParam[] {
  const out: ChatCompletionMessageParam[] = [{ role: 'system', content: system }];
  for (const m of messages) {
    if (m.role === 'user')
      out.push({
        role: 'user',
        content: m.images?.length
          ? [
              ...m.images.map((i) => ({ type: 'image_url' as const, image_url: { url: `data:${i.mimeType};base64,${i.data}` } })),
              { type: 'text' as const, text: m.content },
            ]
          : m.content,
      });
    else if (m.role === 'tool') out.push({ role: 'tool', tool_call_id: m.toolCallId, content: m.content });
    else if (m.toolCalls?.length)
      out.push({
        role: 'assistant',
        content: m.content || null,
        tool_calls: m.toolCalls.map((c) => ({ id: c.id, type: 'function' as const, function: { name: c.name, arguments: JSON.stringify(c.arguments) } })),
      });
    else out.push({ role: 'assistant', content: m.content });
  }
  return out;
}
