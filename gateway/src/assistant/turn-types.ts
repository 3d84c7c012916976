/**
 * What a turn of the tool loop (turn.ts) takes, tells and ends with: its settings, model, input, events, result, and
 * the two ways it stops early. Kept apart so that the routes and the assistant name them without the loop.
 */
import { GatewayError } from '../errors.js';
import type { Tokens } from '../hub/credentials.js';
import type { Caller } from '../hub/hub.js';
import type { Toolset } from './toolset.js';
import type { ChatMessage, ModelProvider, Usage } from './types.js';

export interface TurnSettings {
  maxToolRounds: number;
  maxToolCallsPerRound: number;
  toolTimeoutMs: number;
  modelTimeoutMs: number;
  /** The whole turn (assistant.turnTimeoutMs): past it, what still runs is aborted and the turn fails (TurnTimedOut). */
  turnTimeoutMs: number;
  confirm: 'ask' | 'deny' | 'allow';
  confirmTools: readonly string[];
  confirmTimeoutMs: number;
  maxToolResultChars: number;
}

export interface TurnModel {
  name: string;
  provider: 'openai' | 'anthropic' | 'gemini';
  client: ModelProvider;
  toolMode: 'native' | 'markers' | 'none';
  /** Scrubbed from provider error messages. */
  secret?: string | undefined;
  /** Where the provider is reached (`baseUrl` without credentials or query), named in its errors. */
  endpoint?: string | undefined;
}

export interface ToolCallRecord {
  callId: string;
  name: string;
  arguments: Record<string, unknown>;
  isError: boolean;
  durationMs: number;
}

export interface TurnResult {
  conversationId: string;
  turnId: string;
  text: string;
  toolCalls: ToolCallRecord[];
  rounds: number;
  usage: Usage;
}

export type TurnEvent =
  | { type: 'turn.started'; turnId: string; conversationId: string; model: string }
  | { type: 'resource.read'; uri: string; server: string }
  | { type: 'prompt.used'; name: string; server: string }
  | { type: 'tool.calls'; round: number; count: number }
  | { type: 'tool.call'; callId: string; name: string; arguments: Record<string, unknown>; round: number }
  | { type: 'tool.result'; callId: string; name: string; isError: boolean; durationMs: number; text: string }
  | { type: 'confirmation.required'; callId: string; name: string; arguments: Record<string, unknown>; timeoutMs: number }
  | { type: 'text.delta'; text: string; round: number }
  | ({ type: 'turn.completed' } & TurnResult)
  | { type: 'turn.failed'; turnId: string; code: string; detail: string };

export interface TurnInput {
  turnId: string;
  conversationId: string;
  caller: Caller;
  tokens?: Tokens | undefined;
  model: TurnModel;
  toolset: Toolset;
  /** The base system prompt plus the servers' system_instruction, resources read for this turn. */
  system: string[];
  /** Earlier exchanges, then this turn's messages (prompt template expansion, the user's message). */
  messages: ChatMessage[];
  /** The user's words, for auto-context tools. */
  query: string;
  /** A person can answer confirmations (a stream is open). */
  interactive: boolean;
  /**
   * The caller puts confirmations to the person one at a time (a voice device speaks them) and says when each is asked
   * (Turn.asked): each window starts then, not when the call is made, so a later question's is not spent while an
   * earlier one is asked and answered.
   */
  asksOneAtATime?: boolean | undefined;
  /** Stream text from the model as it arrives. */
  stream: boolean;
  emit(e: TurnEvent): void;
}

export class TurnCancelled extends Error {
  constructor(readonly reason: string) {
    super(`the turn was cancelled: ${reason}`);
  }
}

/**
 * The turn ran past assistant.turnTimeoutMs. modelTimeoutMs bounds each model request only, so a model that kept
 * asking for tools (or tools that kept it waiting) could hold a turn, and a paid model, for (maxToolRounds + 1) ×
 * modelTimeoutMs plus tool time. MODEL_TIMEOUT (504) for the caller, naming the bound.
 */
export class TurnTimedOut extends GatewayError {
  constructor(readonly timeoutMs: number) {
    super(
      'MODEL_TIMEOUT',
      `the turn did not finish within ${timeoutMs} ms (assistant.turnTimeoutMs); the model request and tool calls still running were stopped`,
    );
  }
}
