/**
 * The assistant's provider-neutral vocabulary. Providers translate these to and from their wire formats;
 * the turn loop knows nothing else.
 */

/** A tool as the model sees it. `name` matches ^[a-zA-Z0-9_-]{1,64}$ (what every provider accepts). */
export interface ToolSpec {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

export interface ToolCallRequest {
  id: string;
  name: string;
  arguments: Record<string, unknown>;
  /** Set when the model's arguments were not a JSON object: the call is answered with this error. */
  argumentsError?: string;
  /** Opaque provider state to send back with the call (Gemini's thought signature). */
  signature?: string;
}

/** A picture for a vision-capable model, base64-encoded. */
export interface ImageInput {
  mimeType: 'image/jpeg' | 'image/png' | 'image/gif' | 'image/webp';
  data: string;
}

export type ChatMessage =
  | { role: 'user'; content: string; images?: ImageInput[] }
  | { role: 'assistant'; content: string; toolCalls?: ToolCallRequest[] }
  | { role: 'tool'; toolCallId: string; name: string; content: string; isError: boolean };

export interface Usage {
  inputTokens: number;
  outputTokens: number;
}

export interface ModelRequest {
  system: string;
  messages: ChatMessage[];
  tools: ToolSpec[];
  /** `none`: the tools stay described (history may hold tool calls) but the model must answer in text. */
  toolChoice: 'auto' | 'none';
  signal: AbortSignal;
  /** Given: the provider streams and reports text as it arrives. */
  onText?: (delta: string) => void;
  /**
   * Reasoning the reply carries besides its answer that the SDK keeps until the reply ends (Anthropic thinking blocks),
   * reported as it arrives (streamed) or once read (not): counted with the text against the reply's bound
   * (reply-bounds.ts). Reasoning a provider drops on arrival (OpenAI-compatible reasoning_content, Gemini thoughts)
   * is not reported: only the response's byte bound applies to it.
   */
  onThinking?: (delta: string) => void;
}

export interface ModelReply {
  text: string;
  toolCalls: ToolCallRequest[];
  usage: Usage;
}

export interface ModelProvider {
  complete(req: ModelRequest): Promise<ModelReply>;
}

export const addUsage = (a: Usage, b: Usage): Usage => ({ inputTokens: a.inputTokens + b.inputTokens, outputTokens: a.outputTokens + b.outputTokens });

/** Arguments as the model sent them (a JSON string, or already an object) → an object, or why not. */
export function parseArguments(raw: unknown): { args: Record<string, unknown>; error?: string } {
  let v = raw;
  if (typeof raw === 'string') {
    if (raw.trim() === '') return { args: {} };
    try {
      v = JSON.parse(raw) as unknown;
    } catch {
      return { args: {}, error: 'the arguments were not valid JSON' };
    }
  }
  if (v === undefined || v === null) return { args: {} };
  if (typeof v !== 'object' || Array.isArray(v)) return { args: {}, error: 'the arguments must be a JSON object' };
  return { args: v as Record<string, unknown> };
}
