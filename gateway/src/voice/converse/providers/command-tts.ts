/**
 * Speech synthesis by a local program (espeak-ng, piper): the text as an argument (`{text}`) or on stdin, the
 * voice as `{voice}`; a WAV on stdout, or in `{file}` (a private temp folder) when an argument names it. The
 * WAV's rate is whatever the program writes (espeak-ng: 22050 Hz) and is resampled to `sampleRate`.
 */
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { ProviderError, type SpeechSynthesizer, type SynthesizeOptions } from '../contracts.js';
import { resample } from '../audio/resample.js';
import { WavError, parseWav } from '../audio/wav.js';
import { watchFolderSize } from './folder-bound.js';
import { fillArgs, runCommand } from './run-command.js';

/** A sentence's WAV bigger than this is refused (≈ 6 minutes at 22 kHz). */
const MAX_WAV_BYTES = 16 * 1024 * 1024;
/** Handed out in chunks of this many samples so the consumer can pace and cancel. */
const CHUNK = 4800;

export interface CommandSynthesizerOptions {
  command: string;
  args: string[];
  voice?: string | undefined;
  sampleRate: number;
  timeoutMs: number;
  log: Logger;
  /** The largest WAV taken, on stdout or in the file (MAX_WAV_BYTES unless set; tests set it small). */
  maxWavBytes?: number;
}

export class CommandSynthesizer implements SpeechSynthesizer {
  readonly name = 'command';
  readonly sampleRate: number;

  constructor(private readonly o: CommandSynthesizerOptions) {
    this.sampleRate = o.sampleRate;
  }

  async *synthesize(text: string, opts: SynthesizeOptions): AsyncIterable<Int16Array> {
    let pcm: Int16Array;
    try {
      pcm = await this.run(text, opts);
    } catch (err) {
      const e =
        err instanceof ProviderError
          ? err
          : new ProviderError('bad_output', err instanceof WavError ? `synthesiser output: ${err.message}` : 'synthesiser failed', this.name);
      if (e.code !== 'aborted') this.o.log.warn({ provider: this.name, code: e.code, err: e.message }, 'speech synthesis failed');
      throw e;
    }
    for (let off = 0; off < pcm.length; off += CHUNK) {
      if (opts.signal.aborted) throw new ProviderError('aborted', 'speech cancelled', this.name);
      yield pcm.subarray(off, off + CHUNK);
    }
  }

  private async run(text: string, opts: SynthesizeOptions): Promise<Int16Array> {
    const usesFile = this.o.args.some((a) => a.includes('{file}'));
    const usesText = this.o.args.some((a) => a.includes('{text}'));
    const dir = usesFile ? await mkdtemp(join(tmpdir(), 'voxgate-tts-')) : undefined;
    const maxBytes = this.o.maxWavBytes ?? MAX_WAV_BYTES;
    const tooLarge = () => new ProviderError('too_long', `synthesiser output larger than ${maxBytes} bytes`, this.name);
    try {
      const file = dir ? join(dir, 'speech.wav') : '';
      // A text starting with '-' must not be read as an option: a leading space is harmless to speech engines.
      const safe = text.startsWith('-') ? ` ${text}` : text;
      const args = fillArgs(this.o.args, { file, text: safe, voice: opts.voice ?? this.o.voice ?? '' });
      const r = await runCommand({
        command: this.o.command,
        args,
        stdin: usesText ? undefined : text,
        timeoutMs: this.o.timeoutMs,
        signal: opts.signal,
        maxStdout: usesFile ? 64 * 1024 : maxBytes,
        provider: this.name,
        // The file is measured while the program writes it, and the program killed once the file passes the bound:
        // measured only after it exited, a program that kept writing filled the disk first.
        guard: dir ? (kill) => watchFolderSize(dir, maxBytes, () => kill(tooLarge())) : undefined,
      });
      let wav: Buffer = r.stdout;
      if (dir) {
        const size = (await stat(file).catch(() => undefined))?.size;
        if (size === undefined) throw new ProviderError('bad_output', 'synthesiser wrote no file', this.name);
        // Written between the last measurement and the exit.
        if (size > maxBytes) throw tooLarge();
        wav = await readFile(file);
      }
      const parsed = parseWav(wav, maxBytes);
      return resample(parsed.samples, parsed.sampleRate, this.sampleRate);
    } finally {
      if (dir) await rm(dir, { recursive: true, force: true });
    }
  }
}
