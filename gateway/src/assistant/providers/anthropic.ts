import Anthropic from '@anthropic-ai/sdk';
import type { ContentBlockParam, MessageParam, MessageStreamEvent, Tool } from '@anthropic-ai/sdk/resources/messages';
import { checkFinished } from '../reply-bounds.js';
import { parseArguments, type ChatMessage, type ModelProvider, type ModelReply, type ModelRequest, type ToolCallRequest } from '../types.js';
import type { ProviderOptions } from './index.js';

/** Anthropic Messages with tool use, through the official SDK. */
export class AnthropicProvider implements ModelProvider {
  private readonly client: Anthropic;

  constructor(private readonly o: ProviderOptions) {
    this.client = new Anthropic({
      apiKey: o.apiKey ?? null,
      baseURL: o.baseUrl ?? null,
      maxRetries: o.maxRetries,
      timeout: o.timeoutMs,
      ...(o.fetch ? { fetch: o.fetch } : {}),
    });
  }

  async complete(req: ModelRequest): Promise<ModelReply> {
    const body = {
      model: this.o.model,
      max_tokens: this.o.maxTokens,
      system: req.system,
      messages: toMessages(req.messages),
      ...(req.tools.length ? { tools: req.tools.map(toTool), tool_choice: { type: req.toolChoice } } : {}),
    };
    let message: Anthropic.Message;
    // Streamed: each tool_use block's arguments as they came, by block index. The SDK parses them leniently (a stream
    // cut inside the JSON, at max_tokens or by a broken server, gives what came before the cut as the arguments).
    const streamedArgs = new Map<number, string>();
    if (req.onText) {
      const onText = req.onText;
      const stream = this.client.messages.stream(body, { signal: req.signal });
      stream.on('text', (delta) => onText(delta));
      let stopped = false;
      stream.on('streamEvent', (e) => {
        if (e.type === 'message_stop') stopped = true;
        thinkingOf(e, req.onThinking);
        if (e.type === 'content_block_delta' && e.delta.type === 'input_json_delta')
          streamedArgs.set(e.index, (streamedArgs.get(e.index) ?? '') + e.delta.partial_json);
      });
      // Rejects with what failed the stream (HTTP, parsing, a bound); resolves when it ended, finished or not. The SDK
      // keeps a message only at message_stop: without it, finalMessage() fails with a message that says nothing of a cut.
      await stream.done();
      checkFinished(stopped, req.signal, 'no message_stop');
      message = await stream.finalMessage();
    } else message = await this.client.messages.create({ ...body, stream: false }, { signal: req.signal });
    let text = '';
    const toolCalls: ToolCallRequest[] = [];
    for (const [k, b] of message.content.entries()) {
      if (b.type === 'text') text += b.text;
      // Streamed, its thinking was reported as it came.
      else if (!req.onText && (b.type === 'thinking' || b.type === 'redacted_thinking')) req.onThinking?.(b.type === 'thinking' ? b.thinking : b.data);
      else if (b.type === 'tool_use') {
        const { args, error } = parseArguments(req.onText ? (streamedArgs.get(k) ?? '') : b.input);
        toolCalls.push(error ? { id: b.id, name: b.name, arguments: args, argumentsError: error } : { id: b.id, name: b.name, arguments: args });
      }
    }
    return { text, toolCalls, usage: { inputTokens: message.usage.input_tokens, outputTokens: message.usage.output_tokens } };
  }
}

/**
 * The thinking a stream event adds to the message the SDK keeps (its thinking blocks, never used here: the gateway asks
 * for none, but a server may send them), reported to `onThinking`. A signature replaces the one before: not counted.
 */
function thinkingOf(e: MessageStreamEvent, onThinking: ((delta: string) => void) | undefined): void {
  if (e.type === 'content_block_delta' && e.delta.type === 'thinking_delta') onThinking?.(e.delta.thinking);
  else if (e.type === 'content_block_start' && e.content_block.type === 'thinking') onThinking?.(e.content_block.thinking);
  else if (e.type === 'content_block_start' && e.content_block.type === 'redacted_thinking') onThinking?.(e.content_block.data);
}

function toTool(t: { name: string; description: string; parameters: Record<string, unknown> }): Tool {
  // Anthropic requires an object schema at the top.
  return { name: t.name, description: t.description, input_schema: { ...t.parameters, type: 'object' } };
}

/** Tool results go back as user messages of tool_result blocks; consecutive ones share one message. */
function toMessages(messages: ChatMessage[]): MessageParam[] {
  const out: MessageParam[] = [];
  for (const m of messages) {
    if (m.role === 'tool') {
      const block: ContentBlockParam = { type: 'tool_result', tool_use_id: m.toolCallId, content: m.content, is_error: m.isError };
      const last = out[out.length - 1];
      if (last?.role === 'user' && Array.isArray(last.content) && last.content.every((b) => b.type === 'tool_result')) last.content.push(block);
      else out.push({ role: 'user', content: [block] });
    } else if (m.role === 'user') {
      const blocks: ContentBlockParam[] = [
        ...(m.images ?? []).map((i): ContentBlockParam => ({ type: 'image', source: { type: 'base64', media_type: i.mimeType, data: i.data } })),
        { type: 'text', text: m.content },
      ];
      // A user message right after tool results (the round-limit notice) joins them: roles alternate.
      const last = out[out.length - 1];
      if (last?.role === 'user' && Array.isArray(last.content)) last.content.push(...blocks);
      else out.push({ role: 'user', content: m.images?.length ? blocks : m.content });
    } else {
      const blocks: ContentBlockParam[] = [];
      if (m.content) blocks.push({ type: 'text', text: m.content });
      for (const c of m.toolCalls ?? []) blocks.push({ type: 'tool_use', id: c.id, name: c.name, input: c.arguments });
      out.push({ role: 'assistant', content: blocks.length ? blocks : '' });
    }
  }
  return out;
}
