import { Counter, Histogram, type Registry } from 'prom-client';

/** The assistant's operator counters, registered in the gateway's one registry (labels never name a person or a device). */
export function createAssistantMetrics(registry: Registry) {
  const registers = [registry];
  return {
    turns: new Counter({
      name: 'voxgate_assistant_turns_total',
      help: 'Assistant turns by outcome (completed, failed, cancelled, timeout: past assistant.turnTimeoutMs, stopped)',
      labelNames: ['outcome'] as const,
      registers,
    }),
    rounds: new Histogram({
      name: 'voxgate_assistant_turn_rounds',
      help: 'Model calls per assistant turn',
      buckets: [1, 2, 3, 4, 5, 6, 8, 11, 21, 51],
      registers,
    }),
    toolCalls: new Counter({
      name: 'voxgate_assistant_tool_calls_total',
      help: 'Tool calls the assistant ran, by outcome (ok, error, timeout, declined: a person said no, unconfirmed: no answer in time, nobody to ask or confirm=deny, not_found, invalid, refused)',
      labelNames: ['outcome'] as const,
      registers,
    }),
    modelLatency: new Histogram({
      name: 'voxgate_assistant_model_seconds',
      help: 'Model request duration, by provider and outcome (ok, error, timeout: past modelTimeoutMs or the turn past turnTimeoutMs, cancelled)',
      labelNames: ['provider', 'outcome'] as const,
      buckets: [0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120],
      registers,
    }),
    tokens: new Counter({
      name: 'voxgate_assistant_tokens_total',
      help: 'Model tokens, by provider and direction (input, output)',
      labelNames: ['provider', 'direction'] as const,
      registers,
    }),
    replyFaults: new Counter({
      name: 'voxgate_assistant_model_reply_faults_total',
      help: 'Model replies out of bounds, by provider and reason (too_large: the response past its byte bound, too_long: its text past its length, too_many_tool_calls: over 256 in one reply, truncated: a stream that ended before the model finished, each refused; bad_usage: token counts that are not counts, taken as 0)',
      labelNames: ['provider', 'reason'] as const,
      registers,
    }),
  };
}

export type AssistantMetrics = ReturnType<typeof createAssistantMetrics>;
