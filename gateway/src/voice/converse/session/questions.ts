import type { Logger } from 'pino';
import type { ActiveTurn } from './active-turn.js';

/** What the questions need of their conversation (conversation.ts). */
export interface QuestionHost {
  log: Logger;
  /** Whether the turn is still the one being answered (not aborted, not replaced). */
  live(turn: ActiveTurn): boolean;
  /** A question has been spoken: the device listens, and the utterance it hears next answers it. */
  listen(): void;
  /** A question's window closed unanswered: the turn speaks on (its next question, or the rest of its answer). */
  speakOn(): void;
}

/**
 * The spoken questions of a conversation's turns (the confirmations of the calls that need a yes). The calls of one
 * reply run together, but their questions are asked one at a time, each once the one before it was answered or its
 * window closed, so an answer always answers the question just heard. Each window (assistant.confirmTimeoutMs) starts
 * when its question has been spoken, not when the call was made: a later question's is not spent while an earlier one
 * is asked and answered. A turn's questions are as many as its calls (assistant.maxToolCallsPerRound a reply), each
 * waiting one window at most once asked, all within the turn's deadline (assistant.turnTimeoutMs).
 */
export class Questions {
  constructor(private readonly h: QuestionHost) {}

  /** Asks `speak`'s question for the call once the turn's questions before it are settled. */
  queue(turn: ActiveTurn, callId: string, speak: () => void): void {
    turn.questions = (turn.questions ?? Promise.resolve()).then(() => this.ask(turn, callId, speak));
  }

  /** The utterance heard after the question for `callId` answers it; once its window has closed, the turn has moved on. */
  answer(turn: ActiveTurn, callId: string, yes: boolean): void {
    const waiting = turn.confirming === callId;
    if (waiting) turn.confirming = undefined;
    this.h.log.info({ approved: yes }, 'voice confirmation answered');
    if (!turn.handle?.confirm(callId, yes)) this.h.log.warn('the confirmation had already expired');
    if (waiting) this.next(turn);
  }

  /** A call of the turn has its result: when it is the question waited on, its window closed unanswered (not run). */
  settled(turn: ActiveTurn, callId: string): void {
    if (turn.confirming !== callId || !this.h.live(turn)) return;
    turn.confirming = undefined;
    this.h.log.info('voice confirmation not answered in time; the call was not run');
    this.h.speakOn();
    this.next(turn);
  }

  /** The turn's handle has come (its first question may have been spoken before): the question waited on is asked. */
  started(turn: ActiveTurn): void {
    if (turn.confirming !== undefined) turn.handle?.asked(turn.confirming);
  }

  /** Asks one question; settles once it is answered or its window closed (never, when the turn ends first). */
  private async ask(turn: ActiveTurn, callId: string, speak: () => void): Promise<void> {
    if (!this.h.live(turn)) return;
    speak();
    // Spoken (`tts stop` sent): the device listens, and the question's window starts.
    await turn.speaker.end();
    if (!this.h.live(turn)) return;
    turn.confirming = callId;
    turn.handle?.asked(callId);
    this.h.listen();
    await new Promise<void>((r) => (turn.answered = r));
  }

  private next(turn: ActiveTurn): void {
    const next = turn.answered;
    turn.answered = undefined;
    next?.();
  }
}
