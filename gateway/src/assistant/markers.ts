import type { ChatMessage, ModelProvider, ModelReply, ModelRequest, ToolCallRequest, ToolSpec } from './types.js';
import { addUsage } from './types.js';

/**
 * Tool calls written as text (seed 003), for models without function calling (RKLLM, small local models).
 * The tools and the calling format go into the system prompt; replies are scanned for
 *   [TOOL_CALL]{"name": ..., "arguments": {...}}[END_TOOL_CALL]
 *   <tool_call name="..."><argument name="...">...</argument></tool_call>
 * several per reply, in order. Results go back as "Tool Result" sections. No regular expression here runs
 * on a backtracking-prone pattern: markers are found with indexOf.
 */

const JSON_OPEN = '[TOOL_CALL]';
const JSON_CLOSE = '[END_TOOL_CALL]';
const XML_OPEN = '<tool_call';
const XML_CLOSE = '</tool_call>';
const STARTS = [JSON_OPEN, XML_OPEN];

export interface ParsedMarkers {
  calls: Array<Omit<ToolCallRequest, 'id'>>;
  /** Why each malformed marker could not be read. */
  malformed: string[];
  /** Index of the first marker, or -1. */
  firstMarkerAt: number;
}

/** Every marker in `text`, in the order they appear. */
export function parseMarkers(text: string, tools: readonly ToolSpec[]): ParsedMarkers {
  const calls: ParsedMarkers['calls'] = [];
  const malformed: string[] = [];
  let firstMarkerAt = -1;
  let i = 0;
  for (;;) {
    const j = text.indexOf(JSON_OPEN, i);
    const x = text.indexOf(XML_OPEN, i);
    const at = j === -1 ? x : x === -1 ? j : Math.min(j, x);
    if (at === -1) break;
    if (firstMarkerAt === -1) firstMarkerAt = at;
    if (at === j) {
      const end = text.indexOf(JSON_CLOSE, at);
      if (end === -1) {
        malformed.push(`${JSON_OPEN} without ${JSON_CLOSE}`);
        break;
      }
      const body = text.slice(at + JSON_OPEN.length, end).trim();
      i = end + JSON_CLOSE.length;
      let v: unknown;
      try {
        v = JSON.parse(body);
      } catch {
        malformed.push(`the JSON between ${JSON_OPEN} and ${JSON_CLOSE} is not valid: ${body.slice(0, 120)}`);
        continue;
      }
      const o = v as { name?: unknown; arguments?: unknown };
      const args = o.arguments ?? {};
      if (typeof v !== 'object' || v === null || typeof o.name !== 'string' || typeof args !== 'object' || args === null || Array.isArray(args)) {
        malformed.push(`a ${JSON_OPEN} needs {"name": string, "arguments": object}`);
        continue;
      }
      calls.push({ name: o.name, arguments: args as Record<string, unknown> });
    } else {
      const end = text.indexOf(XML_CLOSE, at);
      if (end === -1) {
        malformed.push(`${XML_OPEN} without ${XML_CLOSE}`);
        break;
      }
      const block = text.slice(at, end);
      i = end + XML_CLOSE.length;
      const parsed = parseXmlCall(block);
      if (typeof parsed === 'string') {
        malformed.push(parsed);
        continue;
      }
      const tool = tools.find((t) => t.name === parsed.name);
      calls.push({ name: parsed.name, arguments: tool ? coerce(parsed.arguments, tool.parameters) : parsed.arguments });
    }
  }
  return { calls, malformed, firstMarkerAt };
}

/** `<tool_call name="x"> <argument name="a">v</argument>... ` (without the closing tag) → name and string arguments. */
function parseXmlCall(block: string): { name: string; arguments: Record<string, string> } | string {
  const head = block.indexOf('>');
  const name = head === -1 ? undefined : attrName(block.slice(XML_OPEN.length, head));
  if (!name) return '<tool_call> needs name="..."';
  const args: Record<string, string> = {};
  let i = head + 1;
  for (;;) {
    const a = block.indexOf('<argument', i);
    if (a === -1) break;
    const h = block.indexOf('>', a);
    const close = block.indexOf('</argument>', h);
    const argName = h === -1 ? undefined : attrName(block.slice(a + '<argument'.length, h));
    if (!argName || close === -1) return `a malformed <argument> in <tool_call name="${name}">`;
    args[argName] = unescapeXml(block.slice(h + 1, close).trim());
    i = close + '</argument>'.length;
  }
  return { name, arguments: args };
}

function attrName(attrs: string): string | undefined {
  const k = attrs.indexOf('name=');
  if (k === -1) return undefined;
  const q = attrs[k + 5];
  if (q !== '"' && q !== "'") return undefined;
  const end = attrs.indexOf(q, k + 6);
  return end === -1 ? undefined : attrs.slice(k + 6, end);
}

const unescapeXml = (s: string) =>
  s
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'")
    .replace(/&amp;/g, '&');

/** XML arguments are strings: turn them into the types the tool's schema asks for (a value that does not fit stays a string, and validation says why). */
export function coerce(args: Record<string, string>, schema: Record<string, unknown>): Record<string, unknown> {
  const props = (schema['properties'] ?? {}) as Record<string, { type?: unknown } | undefined>;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(args)) {
    const t = props[k]?.type;
    const types = Array.isArray(t) ? t : [t];
    out[k] = coerceOne(v, types);
  }
  return out;
}

function coerceOne(v: string, types: unknown[]): unknown {
  for (const t of types) {
    if ((t === 'integer' && /^-?\d+$/.test(v)) || (t === 'number' && v.trim() !== '' && Number.isFinite(Number(v)))) return Number(v);
    if (t === 'boolean' && (v === 'true' || v === 'false')) return v === 'true';
    if (t === 'null' && v === 'null') return null;
    if (t === 'object' || t === 'array') {
      try {
        const parsed = JSON.parse(v) as unknown;
        if (t === 'array' ? Array.isArray(parsed) : typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) return parsed;
      } catch {
        /* stays a string */
      }
    }
  }
  return v;
}

/** The system-prompt section that describes the tools and how to call them. */
export function describeTools(tools: readonly ToolSpec[]): string {
  if (!tools.length) return '';
  const lines = ['You can use these tools:', ''];
  for (const t of tools) lines.push(`- ${t.name}: ${t.description || '(no description)'}`, `  arguments (JSON Schema): ${JSON.stringify(t.parameters)}`);
  lines.push(
    '',
    'To use a tool, write exactly:',
    JSON_OPEN,
    '{"name": "tool_name", "arguments": {"arg1": "value1"}}',
    JSON_CLOSE,
    `or <tool_call name="tool_name"><argument name="arg1">value1</argument></tool_call>`,
    'You may call several tools in one reply. Write nothing after your tool calls; the results will follow. When you need no tool, just answer.',
  );
  return lines.join('\n');
}

export const ANSWER_FROM_RESULTS = "Answer the user's question from the tool results above.";

/**
 * A provider wrapper for `toolMode: markers`, one per turn: tools into the prompt, calls out of the text,
 * results back as "Tool Result" sections, malformed markers reported to the model once per turn (after
 * that a malformed marker is text).
 */
export class MarkerModel implements ModelProvider {
  private reported = false;
  private seq = 0;
  /** A note about malformed markers next to valid ones, sent with the next tool results. */
  private pendingNote: string | undefined;

  constructor(private readonly inner: ModelProvider) {}

  async complete(req: ModelRequest): Promise<ModelReply> {
    const tools = req.toolChoice === 'none' ? [] : req.tools;
    const system = [req.system, describeTools(tools)].filter(Boolean).join('\n\n');
    let messages = toText(req.messages, this.pendingNote);
    this.pendingNote = undefined;
    let usage = { inputTokens: 0, outputTokens: 0 };
    for (;;) {
      const hold = holdBack(req.onText);
      const r = await this.inner.complete({ ...req, system, messages, tools: [], toolChoice: 'auto', ...(hold.onText ? { onText: hold.onText } : {}) });
      usage = addUsage(usage, r.usage);
      if (!tools.length) {
        hold.flush(r.text);
        return { text: r.text, toolCalls: [], usage };
      }
      const p = parseMarkers(r.text, tools);
      if (p.malformed.length && !p.calls.length && !this.reported) {
        // Tell the model once what was wrong, and ask again.
        this.reported = true;
        messages = [
          ...messages,
          { role: 'assistant', content: r.text },
          { role: 'user', content: `Your tool call could not be read (${p.malformed.join('; ')}). Use exactly the format described, or answer without tools.` },
        ];
        continue;
      }
      if (!p.calls.length) {
        hold.flush(r.text);
        return { text: r.text, toolCalls: [], usage };
      }
      if (p.malformed.length && !this.reported) {
        this.reported = true;
        this.pendingNote = `Some tool calls could not be read: ${p.malformed.join('; ')}.`;
      }
      return { text: r.text, toolCalls: p.calls.map((c) => ({ ...c, id: `m${++this.seq}` })), usage };
    }
  }
}

/** Assistant tool-call messages become their text; each run of tool results becomes one user message of "Tool Result" sections. */
export function toText(messages: ChatMessage[], note?: string): ChatMessage[] {
  const out: ChatMessage[] = [];
  let results: string[] = [];
  const flush = () => {
    if (!results.length) return;
    out.push({ role: 'user', content: `${results.join('\n\n')}\n\n${note ? `${note}\n` : ''}${ANSWER_FROM_RESULTS}` });
    results = [];
  };
  for (const m of messages) {
    if (m.role === 'tool') {
      results.push(`## Tool Result: ${m.name}${m.isError ? ' (error)' : ''}\n\`\`\`\n${m.content}\n\`\`\``);
      continue;
    }
    flush();
    out.push(m.role === 'assistant' ? { role: 'assistant', content: m.content } : m);
  }
  flush();
  return out;
}

/**
 * Stream text while it cannot be part of a marker: hold back a tail that may be the start of one, stop
 * at the first marker. What was held is released by `flush` when the reply turned out to be the answer.
 */
function holdBack(onText: ((d: string) => void) | undefined): { onText?: (d: string) => void; flush(full: string): void } {
  if (!onText) return { flush: () => undefined };
  let buf = '';
  let sent = 0;
  let stopped = false;
  return {
    onText(d) {
      buf += d;
      if (stopped) return;
      const at = Math.min(...STARTS.map((s) => buf.indexOf(s)).filter((n) => n !== -1), Infinity);
      let safe = buf.length;
      if (at !== Infinity) {
        safe = at;
        stopped = true;
      } else
        for (const s of STARTS)
          for (let k = Math.min(s.length - 1, buf.length); k > 0; k--)
            if (buf.endsWith(s.slice(0, k))) {
              safe = Math.min(safe, buf.length - k);
              break;
            }
      if (safe > sent) {
        onText(buf.slice(sent, safe));
        sent = safe;
      }
    },
    flush(full) {
      if (full.length > sent) onText(full.slice(sent));
      sent = full.length;
    },
  };
}
