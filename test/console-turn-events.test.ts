import { describe, expect, it } from 'vitest';
import { turnEventOf } from '../console/src/lib/turn-events.js';

/** The console's reading of the assistant's stream: the gateway's events pass, anything malformed is skipped. */
describe('console turn events', () => {
  it('reads the events the chat panel shows', () => {
    expect(turnEventOf('turn.started', '{"type":"turn.started","turnId":"t1","conversationId":"c1","model":"oa"}')).toEqual({
      type: 'turn.started',
      turnId: 't1',
      conversationId: 'c1',
      model: 'oa',
    });
    expect(turnEventOf('tool.call', '{"callId":"k","name":"self_light_set","arguments":{"on":true},"round":1}')).toEqual({
      type: 'tool.call',
      callId: 'k',
      name: 'self_light_set',
      arguments: { on: true },
      round: 1,
    });
    expect(turnEventOf('tool.result', '{"callId":"k","name":"n","isError":true,"durationMs":12,"text":"boom"}')).toEqual({
      type: 'tool.result',
      callId: 'k',
      name: 'n',
      isError: true,
      durationMs: 12,
      text: 'boom',
    });
    expect(turnEventOf('confirmation.required', '{"callId":"k","name":"n","arguments":{},"timeoutMs":60000}')).toMatchObject({
      type: 'confirmation.required',
      timeoutMs: 60000,
    });
    expect(turnEventOf('text.delta', '{"text":"Hel","round":2}')).toEqual({ type: 'text.delta', text: 'Hel' });
    expect(turnEventOf('turn.completed', '{"turnId":"t1","conversationId":"c1","text":"Done.","toolCalls":[],"rounds":1}')).toEqual({
      type: 'turn.completed',
      turnId: 't1',
      conversationId: 'c1',
      text: 'Done.',
    });
    expect(turnEventOf('turn.failed', '{"turnId":"t1","code":"MODEL_ERROR","detail":"bad key"}')).toEqual({
      type: 'turn.failed',
      turnId: 't1',
      code: 'MODEL_ERROR',
      detail: 'bad key',
    });
  });

  it('skips what it does not know or cannot trust', () => {
    expect(turnEventOf('tool.calls', '{"round":1,"count":2}')).toBeUndefined();
    expect(turnEventOf(undefined, '{"text":"x"}')).toBeUndefined();
    expect(turnEventOf('text.delta', 'not json')).toBeUndefined();
    expect(turnEventOf('text.delta', '[{"text":"x"}]')).toBeUndefined();
    expect(turnEventOf('text.delta', '{"text":42}')).toBeUndefined();
    expect(turnEventOf('tool.call', '{"name":"n"}')).toBeUndefined();
    expect(turnEventOf('turn.started', '{"turnId":"t1"}')).toBeUndefined();
    // Arguments that are not an object become {}; a failure without a code is still a failure.
    expect(turnEventOf('tool.call', '{"callId":"k","name":"n","arguments":[1,2]}')).toMatchObject({ arguments: {} });
    expect(turnEventOf('turn.failed', '{}')).toEqual({ type: 'turn.failed', turnId: '', code: 'INTERNAL', detail: '' });
  });
});
