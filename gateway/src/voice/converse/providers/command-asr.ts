/**
 * Speech recognition by a local program, fully offline (whisper.cpp's CLI, pocketsphinx, vosk scripts): the
 * utterance as a WAV file in a private temp folder (`{file}` in the arguments) or on stdin when no argument
 * names `{file}`; the transcript is what the program prints on stdout (trimmed, bounded).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { RecognizeOptions, SpeechRecognizer } from '../contracts.js';
import { ProviderError } from '../contracts.js';
import { fillArgs, runCommand } from './run-command.js';

const MAX_TRANSCRIPT_BYTES = 64 * 1024;

export interface CommandRecognizerOptions {
  command: string;
  args: string[];
  language?: string | undefined;
  timeoutMs: number;
  log: Logger;
}

export class CommandRecognizer implements SpeechRecognizer {
  readonly name = 'command';

  constructor(private readonly o: CommandRecognizerOptions) {}

  async transcribe(wav: Buffer, opts: RecognizeOptions): Promise<string> {
    const usesFile = this.o.args.some((a) => a.includes('{file}'));
    const dir = usesFile ? await mkdtemp(join(tmpdir(), 'voxgate-asr-')) : undefined;
    try {
      const file = dir ? join(dir, 'utterance.wav') : '';
      if (dir) await writeFile(file, wav, { mode: 0o600 });
      const args = fillArgs(this.o.args, { file, language: opts.language ?? this.o.language ?? '' });
      const r = await runCommand({
        command: this.o.command,
        args,
        stdin: dir ? undefined : wav,
        timeoutMs: this.o.timeoutMs,
        signal: opts.signal,
        maxStdout: MAX_TRANSCRIPT_BYTES,
        provider: this.name,
      });
      return r.stdout.toString('utf8').replace(/\s+/g, ' ').trim();
    } catch (err) {
      const e = err instanceof ProviderError ? err : new ProviderError('process', 'recogniser failed', this.name);
      if (e.code !== 'aborted') this.o.log.warn({ provider: this.name, code: e.code, err: e.message }, 'speech recognition failed');
      throw e;
    } finally {
      if (dir) await rm(dir, { recursive: true, force: true });
    }
  }
}
