import { GatewayError } from '../../../errors.js';
import { ThrottledLog } from '../../../throttle/throttled-log.js';
import { ProviderError } from '../contracts.js';
import type { ConverseStage, TurnOutcome } from '../metrics.js';
import { sessionPacer, type DownlinkPacer } from './pacer.js';
import { SentenceSplitter } from '../audio/sentences.js';
import { Speaker, type SpeakerDeps } from './speaker.js';
import { toDevice, type ListenMode, type VoiceInput } from './wire.js';
import { confirmQuestion, isYes } from './confirm-words.js';
import { Questions } from './questions.js';
import { Speculation, requestTranscript, type AsrRequest, type AsrRequestDeps } from './speculation.js';
import { UPLINK_RATE, type ConverseSessionDeps, type TurnSignal } from './ports.js';
import { concat, timingsOf, type ActiveTurn, type AsrMarks } from './active-turn.js';
import { describeFailure } from './failure.js';

/** Spoken when the gateway is too busy to answer (its own bounds, not a provider's failure). */
const BUSY_ANSWER = "I'm busy right now; please try again in a moment.";
/** Why an answer's turn was cancelled at voice.converse.maxAnswerChars. */
const TOO_LONG = 'the answer was longer than voice.converse.maxAnswerChars';

/**
 * One device's conversation: it listens (manual, auto or realtime), hears the end of an utterance,
 * transcribes it, runs an assistant turn bound to the device, and speaks the answer sentence by sentence,
 * paced. Abort and barge-in stop speaking at once and cancel the turn's model and synthesis requests.
 * Everything the device sends is handled without throwing; every buffer is bounded.
 */
export class ConverseSession {
  private mode: ListenMode = 'auto';
  private listening = false;
  private chunks: Int16Array[] = [];
  private samples = 0;
  private speechSeen = false;
  /** An utterance is being transcribed or answered: uplink audio waits (realtime: barge-in only). */
  private busy = false;
  private asrAc: AbortController | undefined;
  private turn: ActiveTurn | undefined;
  private readonly pacer: DownlinkPacer;
  private closed = false;
  /** The last utterance was refused by the device's rate (the device was told once). */
  private limited = false;
  /**
   * Whether the utterance being heard may reach the recogniser: asked of the device's rate once, by its first request
   * (speculative or final); undefined until then.
   */
  private utteranceAdmitted: boolean | undefined;
  /**
   * Realtime: until then (the pacer's clock) the device still plays what it was sent, microphone open, so what it
   * streams is not listened to (0: nothing left playing). Its echo canceller leaves some of our own voice in it.
   */
  private playingUntil = 0;
  private frameSentHook: (() => void) | undefined;
  private readonly asrDeps: AsrRequestDeps;
  private readonly speculation: Speculation;
  private readonly questions: Questions;
  private lines: ThrottledLog | undefined;

  constructor(private readonly d: ConverseSessionDeps) {
    this.asrDeps = { asr: d.asr, wav: (p, r) => d.audio.wav(p, r), language: d.language, timeoutMs: d.limits.asrTimeoutMs };
    const counted = (r: 'used' | 'aborted') => d.metrics.speculativeAsr[r].inc();
    this.speculation = new Speculation({ ...this.asrDeps, afterMs: d.limits.speculateAfterMs ?? 0, counted });
    this.pacer = sessionPacer(d, () => this.frameSentHook?.());
    this.questions = new Questions({
      log: d.log,
      live: (turn) => !turn.ac.signal.aborted && this.turn === turn,
      listen: () => {
        this.d.metrics.outcome.confirmation.inc();
        this.busy = false;
        this.resetUplink();
        this.playingUntil = this.pacer.playedOutAt;
      },
      speakOn: () => {
        this.busy = true;
        this.resetUplink();
      },
    });
  }

  get state(): 'listening' | 'busy' | 'idle' {
    return this.busy ? 'busy' : this.listening ? 'listening' : 'idle';
  }

  /** A control message from the device. */
  input(i: VoiceInput): void {
    if (this.closed) return;
    switch (i.kind) {
      case 'listen_start':
        this.mode = i.mode;
        this.listening = true;
        if (!this.busy) this.resetUplink();
        return;
      case 'listen_stop':
        this.listening = false;
        if (!this.busy && this.speechSeen) this.endUtterance();
        else if (!this.busy) this.resetUplink();
        return;
      case 'detect':
        // The wake word (its audio was sent first): a turn with its text, as if it had been heard.
        if (i.text.trim() && !this.admitted()) return;
        this.stopSpeaking('barge_in', false);
        this.resetUplink();
        if (i.text.trim()) this.startTurn(i.text.trim(), performance.now(), undefined);
        return;
      case 'abort':
        this.stopSpeaking('aborted', true);
        return;
      default:
        return;
    }
  }

  /** One uplink Opus packet. */
  audio(opus: Uint8Array): void {
    if (this.closed) return;
    this.d.metrics.framesUp.inc();
    // Busy outside realtime: the audio is not listened to, so not decoded either.
    if (this.busy && this.mode !== 'realtime') return;
    // Realtime, our answer over (or a question asked) while the device still plays its last frames: our own voice in its
    // microphone is not the person's next utterance, nor the answer to the question (whose words include "yes").
    if (this.playingUntil !== 0) {
      if (!this.busy && this.mode === 'realtime' && this.pacer.clock < this.playingUntil) return;
      this.playingUntil = 0;
    }
    const pcm = this.d.audio.decoder.decode(opus);
    if (!pcm.length) return;
    if (this.busy) {
      // Realtime: the device streams while it plays; speech over our own playback is a barge-in.
      if (this.mode !== 'realtime' || !this.turn?.speaker.speaking) return;
      if (this.d.audio.detector.push(pcm) === 'silence') return;
      this.stopSpeaking('barge_in', true);
      this.listening = true;
      this.speechSeen = true;
      this.keep(pcm);
      return;
    }
    if (!this.listening) return;
    this.keep(pcm);
    const v = this.d.audio.detector.push(pcm);
    if (v !== 'silence') this.speechSeen = true;
    if (!this.speechSeen) this.trimPreRoll();
    if ((this.mode !== 'manual' && v === 'end') || this.samples >= (this.d.limits.maxUtteranceMs * UPLINK_RATE) / 1000) return this.endUtterance();
    if (this.speechSeen)
      this.speculation.update(
        this.samples,
        this.d.audio.detector.quietMs,
        () => concat(this.chunks, this.samples),
        () => (this.utteranceAdmitted ??= this.admitted()),
      );
  }

  /** The device went away or the session ended: everything stops, nothing more is sent. */
  close(): void {
    if (this.closed) return;
    if (this.busy) this.d.metrics.outcome.device_gone.inc();
    this.closed = true;
    this.asrAc?.abort();
    this.speculation.reset();
    this.cancelTurn('the device left');
    this.pacer.close();
    this.chunks = [];
    this.d.audio.decoder.free();
    this.d.audio.encoder.free();
  }

  private keep(pcm: Int16Array): void {
    this.chunks.push(pcm);
    this.samples += pcm.length;
  }

  private trimPreRoll(): void {
    const max = (this.d.limits.preRollMs * UPLINK_RATE) / 1000;
    while (this.chunks.length > 1 && this.samples - this.chunks[0]!.length >= max) this.samples -= this.chunks.shift()!.length;
  }

  private resetUplink(): void {
    this.chunks = [];
    this.samples = 0;
    this.speechSeen = false;
    this.utteranceAdmitted = undefined;
    this.speculation.reset();
    this.d.audio.detector.reset();
  }

  private endUtterance(): void {
    const heard = this.speechSeen;
    // A speculative request already covers the utterance when only quiet followed it.
    const early = heard ? this.speculation.take(this.samples, this.d.audio.detector.quietMs) : undefined;
    const pcm = heard && !early ? concat(this.chunks, this.samples) : undefined;
    // A speculative request was admitted before it was sent; an utterance refused then is not asked about again.
    const admitted = this.utteranceAdmitted;
    this.resetUplink();
    // Silence or noise: no stt, no tts; the device keeps listening (or goes idle after a manual stop).
    if (!heard) return void this.d.metrics.outcome.silence.inc();
    if (!early && !(admitted ?? this.admitted())) return;
    const speechEnd = performance.now();
    void this.transcribe(early ?? requestTranscript(this.asrDeps, pcm ?? new Int16Array(0)), speechEnd);
  }

  /**
   * The device's rate of utterances and wake words that reach the recogniser or the model: past it the utterance
   * is counted (`rate_limited`) and not answered, and the device is told once per streak.
   */
  private admitted(): boolean {
    if (!this.d.admit || this.d.admit()) {
      this.limited = false;
      return true;
    }
    this.d.metrics.outcome.rate_limited.inc();
    if (!this.limited) this.d.out.json(toDevice.alert(this.d.sessionId, 'Too many requests; wait a moment before speaking again'));
    this.limited = true;
    return false;
  }

  private async transcribe(req: AsrRequest, speechEnd: number): Promise<void> {
    // Heard after a question: the answer to that one, whatever happens to it while this is transcribed.
    const asked = this.turn?.confirming;
    const asking = this.turn;
    this.busy = true;
    const ac = req.ac;
    this.asrAc = ac;
    let text: string;
    try {
      text = await req.text;
    } catch (e) {
      if (ac.signal.aborted || this.closed) return;
      this.busy = false;
      const busy = e instanceof ProviderError && e.code === 'busy';
      this.providerFailed('asr', e, busy ? BUSY_ANSWER : "Sorry, I couldn't hear that. Speech recognition is not working.");
      return;
    } finally {
      if (this.asrAc === ac) this.asrAc = undefined;
    }
    if (ac.signal.aborted || this.closed) return;
    if (!text) {
      this.busy = false;
      this.d.metrics.outcome.empty_transcript.inc();
      return;
    }
    const asr: AsrMarks = { startMs: req.startedAt - speechEnd, readyMs: performance.now() - speechEnd };
    if (asked !== undefined && asking && this.turn === asking) {
      this.d.out.json(toDevice.stt(this.d.sessionId, text));
      this.d.events.transcript(text);
      asking.marks = { speechEnd, asr };
      this.frameSentHook = this.firstFrameHook(asking);
      return this.questions.answer(asking, asked, isYes(text));
    }
    this.startTurn(text, speechEnd, asr);
  }

  private startTurn(text: string, speechEnd: number, asr: AsrMarks | undefined): void {
    this.cancelTurn('a new turn began');
    this.busy = true;
    this.d.out.json(toDevice.stt(this.d.sessionId, text));
    this.d.out.json(toDevice.llm(this.d.sessionId, 'thinking'));
    this.d.events.transcript(text);
    const ac = new AbortController();
    const speaker = this.speaker(ac.signal, {
      voice: this.d.voice,
      onError: (e) => this.providerFailed('tts', e, undefined),
      onSpeaking: () => this.d.audio.detector.reset(),
    });
    const turn: ActiveTurn = { ac, speaker, spokenText: [], marks: { speechEnd, ...(asr ? { asr } : {}) } };
    this.turn = turn;
    this.frameSentHook = this.firstFrameHook(turn);
    void this.runTurn(turn, text);
  }

  /** A speaker on this session's synthesiser, encoder and pacer, for one turn. */
  private speaker(signal: AbortSignal, o: Pick<SpeakerDeps, 'onError'> & Partial<Pick<SpeakerDeps, 'voice' | 'onSpeaking'>>): Speaker {
    const resample = (p: Int16Array, f: number, t: number) => this.d.audio.resample(p, f, t);
    return new Speaker({ sessionId: this.d.sessionId, synth: this.d.tts, encoder: this.d.audio.encoder, resample, pacer: this.pacer, signal, ...o });
  }

  private firstFrameHook(turn: ActiveTurn): () => void {
    return () => {
      this.frameSentHook = undefined;
      if (turn.marks.firstAudio === undefined) {
        turn.marks.firstAudio = performance.now();
        this.d.metrics.latency.observe((turn.marks.firstAudio - turn.marks.speechEnd) / 1000);
      }
    };
  }

  private async runTurn(turn: ActiveTurn, text: string): Promise<void> {
    const split = new SentenceSplitter();
    const max = this.d.limits.maxAnswerChars ?? Infinity;
    let chars = 0;
    let cut = false;
    const say = (sentences: string[]) => {
      for (const s of sentences) {
        if (cut) return;
        const next = chars + (chars ? 1 : 0) + s.length;
        if (next > max) {
          cut = true;
          return this.answerTooLong(turn, chars);
        }
        chars = next;
        turn.marks.firstSentence ??= performance.now();
        turn.spokenText.push(s);
        turn.speaker.say(s);
      }
    };
    const emit = (e: TurnSignal) => {
      if (turn.ac.signal.aborted) return;
      if (e.type === 'text.delta' && 'text' in e) {
        turn.marks.llmFirst ??= performance.now();
        say(split.push(e.text));
      } else if (e.type === 'confirmation.required' && 'callId' in e && 'arguments' in e) {
        say(split.flush());
        const question = confirmQuestion(e, this.d.language, this.d.deviceId);
        this.questions.queue(turn, e.callId, () => say([question]));
      } else if ((e.type === 'tool.call' || e.type === 'tool.result') && 'name' in e) {
        this.d.events.tool(
          e.type === 'tool.call'
            ? { phase: 'call', name: e.name }
            : { phase: 'result', name: e.name, isError: 'isError' in e && e.isError, durationMs: 'durationMs' in e ? e.durationMs : 0 },
        );
        if (e.type === 'tool.result' && 'callId' in e) this.questions.settled(turn, e.callId);
      }
    };
    let outcome: TurnOutcome = 'answered';
    try {
      turn.handle = await this.d.turns.start({ text, deviceId: this.d.deviceId, conversationId: this.d.conversation.get() }, emit);
      if (turn.ac.signal.aborted) {
        turn.handle.cancel('aborted');
        return;
      }
      this.questions.started(turn);
      if (cut) turn.handle.cancel(TOO_LONG);
      const r = await turn.handle.done;
      this.d.conversation.set(r.conversationId);
      say(split.flush());
      // A model that did not stream still has its answer spoken.
      if (!turn.spokenText.length && r.text) {
        const whole = new SentenceSplitter();
        say([...whole.push(r.text), ...whole.flush()]);
      }
      await turn.speaker.end();
    } catch (e) {
      if (turn.ac.signal.aborted || this.closed) return;
      // Cut at maxAnswerChars (the model's request closed): what was said so far is the answer.
      if (cut) return void (await turn.speaker.end());
      outcome = 'failed';
      const msg =
        e instanceof GatewayError && (e.code === 'TOO_MANY_TURNS' || e.code === 'CONVERSATION_BUSY' || e.code === 'MODEL_BUSY')
          ? BUSY_ANSWER
          : "Sorry, I can't answer right now.";
      this.providerFailed('llm', e, undefined);
      say([msg]);
      await turn.speaker.end();
    } finally {
      if (this.turn === turn && !turn.ac.signal.aborted) this.finishTurn(turn, outcome);
    }
  }

  /**
   * The answer reached maxAnswerChars (a model steered into talking on, or broken): the rest is not spoken and the
   * model's request is closed; counted, logged a line a minute.
   */
  private answerTooLong(turn: ActiveTurn, spoken: number): void {
    this.d.metrics.providerErrors.inc({ stage: 'llm', code: 'too_long' });
    this.lines ??= new ThrottledLog(this.d.log, 'warn', { linesPerWindow: 1, windowMs: 60_000 });
    this.lines.write({ spokenChars: spoken, maxAnswerChars: this.d.limits.maxAnswerChars }, 'answer longer than voice.converse.maxAnswerChars; cut');
    turn.handle?.cancel(TOO_LONG);
  }

  private finishTurn(turn: ActiveTurn, outcome: TurnOutcome): void {
    this.turn = undefined;
    this.busy = false;
    this.frameSentHook = undefined;
    this.resetUplink();
    this.playingUntil = this.pacer.playedOutAt;
    this.d.metrics.outcome[outcome].inc();
    this.d.events.reply({ text: turn.spokenText.join(' '), outcome, timings: timingsOf(turn.marks, performance.now()) });
  }

  /** Abort or barge-in: stop the audio now, cancel the turn's model and synthesis, tell the device. */
  private stopSpeaking(outcome: 'aborted' | 'barge_in', answer: boolean): void {
    const hadTurn = this.busy || this.turn !== undefined;
    this.asrAc?.abort();
    this.cancelTurn(outcome === 'aborted' ? 'aborted by the device' : 'the person spoke');
    this.pacer.clear();
    if (answer) this.d.out.json(toDevice.ttsStop(this.d.sessionId));
    if (hadTurn) this.d.metrics.outcome[outcome].inc();
    this.busy = false;
    this.resetUplink();
    // Told to stop: the device plays nothing more.
    this.playingUntil = 0;
  }

  private cancelTurn(reason: string): void {
    const t = this.turn;
    if (!t) return;
    this.turn = undefined;
    this.frameSentHook = undefined;
    t.ac.abort();
    t.handle?.cancel(reason);
  }

  /** Counted, logged without secrets, shown on the device (and spoken where speech still works). */
  private providerFailed(stage: ConverseStage, e: unknown, spoken: string | undefined): void {
    const { code, provider, message, shown } = describeFailure(stage, e);
    this.d.metrics.providerErrors.inc({ stage, code });
    // A refusal by the gateway-wide bound (modelRequests) is counted and logged, throttled, by the gate.
    if (code === 'busy' || code === 'model_busy') this.d.log.debug({ stage, code, provider, err: message }, 'voice provider request refused');
    else this.d.log.warn({ stage, code, provider, err: message }, 'voice provider failed');
    this.d.out.json(toDevice.alert(this.d.sessionId, shown));
    if (spoken && !this.closed) {
      // A turn waiting for the answer to its question (the recogniser failed on it) ends here, its call not run: left
      // in place it waited out assistant.confirmTimeoutMs, then spoke on with no abort or close reaching it.
      this.cancelTurn('the answer to its question could not be heard');
      // Spoken through a throwaway turn of the speaker: the device hears why, not just silence.
      const ac = new AbortController();
      const speaker = this.speaker(ac.signal, { onError: () => undefined });
      this.d.metrics.outcome.failed.inc();
      this.busy = true;
      const turn: ActiveTurn = { ac, speaker, spokenText: [spoken], marks: { speechEnd: performance.now() } };
      this.turn = turn;
      speaker.say(spoken);
      void speaker.end().finally(() => {
        if (this.turn !== turn) return;
        this.turn = undefined;
        this.busy = false;
        this.resetUplink();
        this.playingUntil = this.pacer.playedOutAt;
      });
    }
  }
}
