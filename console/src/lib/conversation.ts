/**
 * A device's conversation (voice.mode "converse") from its voice.* events: what was heard, the tools run,
 * what was answered and how long each part took. Event data come from the gateway (converse.ts) and are
 * checked field by field. No DOM: unit-tested in Node.
 */
import type { GatewayEvent } from './types.js';

export interface Timings {
  asrMs?: number;
  llmFirstTokenMs?: number;
  firstSentenceMs?: number;
  firstAudioMs?: number;
  totalMs?: number;
}

export type Line =
  | { kind: 'heard'; id: string; at: string; deviceId: string; session: string; text: string }
  | {
      kind: 'tool';
      id: string;
      at: string;
      deviceId: string;
      session: string;
      name: string;
      state: 'running' | 'ok' | 'error';
      durationMs?: number;
    }
  | { kind: 'reply'; id: string; at: string; deviceId: string; session: string; text: string; outcome: string; timings: Timings };

const str = (v: unknown, max = 4000) => (typeof v === 'string' ? v.slice(0, max) : undefined);
const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

const TIMING_KEYS = ['asrMs', 'llmFirstTokenMs', 'firstSentenceMs', 'firstAudioMs', 'totalMs'] as const;

/** `events` in any order → the lines, oldest first; a tool's result updates its call's line. */
export function conversationOf(events: readonly GatewayEvent[]): Line[] {
  const lines: Line[] = [];
  const open = new Map<string, number>();
  const sorted = events.filter((e) => e.type.startsWith('voice.')).sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0));
  for (const e of sorted) {
    const d = e.data;
    const session = str(d['session'], 128) ?? '';
    const base = { id: e.id, at: e.at, deviceId: e.deviceId, session };
    if (e.type === 'voice.transcript') {
      const text = str(d['text']);
      if (text !== undefined) lines.push({ kind: 'heard', ...base, text });
    } else if (e.type === 'voice.reply') {
      const timings: Timings = {};
      const raw = typeof d['timings'] === 'object' && d['timings'] !== null ? (d['timings'] as Record<string, unknown>) : {};
      for (const k of TIMING_KEYS) {
        const v = num(raw[k]);
        if (v !== undefined) timings[k] = v;
      }
      lines.push({ kind: 'reply', ...base, text: str(d['text']) ?? '', outcome: str(d['outcome'], 64) ?? 'answered', timings });
    } else if (e.type === 'voice.tool') {
      const name = str(d['name'], 256);
      if (!name) continue;
      const key = `${e.deviceId} ${session} ${name}`;
      if (d['phase'] === 'result') {
        const at = open.get(key);
        const state: 'ok' | 'error' = d['isError'] === true ? 'error' : 'ok';
        const durationMs = num(d['durationMs']);
        const done = { kind: 'tool' as const, ...base, name, state, ...(durationMs !== undefined ? { durationMs } : {}) };
        if (at === undefined) lines.push(done);
        else {
          lines[at] = { ...done, id: lines[at]!.id, at: lines[at]!.at };
          open.delete(key);
        }
      } else {
        open.set(key, lines.length);
        lines.push({ kind: 'tool', ...base, name, state: 'running' });
      }
    }
  }
  return lines;
}

/** "heard 320 ms · first token 410 ms · …" for a reply's timings. */
export function timingsText(t: Timings): string {
  const parts: Array<[string, number | undefined]> = [
    ['speech recognised', t.asrMs],
    ['first token', t.llmFirstTokenMs],
    ['first sentence', t.firstSentenceMs],
    ['first audio', t.firstAudioMs],
    ['total', t.totalMs],
  ];
  return parts
    .filter((p): p is [string, number] => p[1] !== undefined)
    .map(([k, v]) => `${k} ${Math.round(v)} ms`)
    .join(' · ');
}

/** Outcomes other than an answer, said in words. */
export const OUTCOME_TEXT: Record<string, string> = {
  silence: 'nothing was said',
  empty_transcript: 'nothing was understood',
  aborted: 'stopped by the device',
  barge_in: 'interrupted by the speaker',
  failed: 'failed',
  device_gone: 'the device left',
  confirmation: 'waiting for a spoken yes',
};
