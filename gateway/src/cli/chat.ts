import { createInterface } from 'node:readline';
import { normalizeDeviceId } from '@voxgate/protocol';
import type { Readable, Writable } from 'node:stream';
import { forTerminal } from '../schemas/showable.js';
import { ApiError, GatewayClient, type TurnEventData } from './client.js';

/**
 * `voxgate chat`: a terminal chat with the assistant of a running gateway. It streams the answer, prints
 * seed 003's progress lines ([MCP: Calling tool 'x'] ...), asks y/N for confirmations, and knows a few
 * slash commands. Ctrl-C cancels the running turn; a second Ctrl-C (or one while idle) exits.
 */
export interface ChatOptions {
  url: string;
  key: string | undefined;
  model?: string | undefined;
  device?: string | undefined;
  /** Answer this one message and exit (non-zero on failure). */
  message?: string | undefined;
  input: Readable;
  output: Writable;
  errors: Writable;
  interactive: boolean;
}

const HELP = `Commands:
  /prompt <name> [k=v ...]  start a turn from a prompt template
  /resource <uri>           attach a resource to the next message
  /tools [all]              list the tools the assistant can use (bound to a device: its tools,
                            not other devices'; all: every tool)
  /devices                  list the devices
  /device [<id>]            bind the chat to a device (no id: unbind)
  /model [<name>]           choose the model (no name: list them)
  /new                      start a new conversation
  /help                     this help
  /quit                     leave (Ctrl-C cancels a turn; twice leaves)`;

interface ListedTool {
  name: string;
  description: string;
  source?: { kind?: string; deviceId?: string; tool?: string };
}

/**
 * `/tools`: bound to a device, that device's tools first (by the device's own names) and other devices'
 * tools left out, as the chat is about that device; servers' and the generic device tools stay listed.
 */
export function toolLines(tools: readonly ListedTool[], device: string | undefined): string[] {
  const line = (name: string, t: ListedTool) => `${name}  ${t.description.split('\n')[0]!.slice(0, 100)}`;
  const bound = device === undefined ? undefined : (normalizeDeviceId(device) ?? device.toLowerCase());
  if (bound === undefined) return tools.length ? tools.map((t) => line(t.name, t)) : ['(no tools)'];
  const onDevice = (t: ListedTool) => t.source?.kind === 'device';
  const mine = tools.filter((t) => onDevice(t) && t.source?.deviceId === bound);
  const others = tools.filter((t) => !onDevice(t));
  const hidden = tools.length - mine.length - others.length;
  // Without per-device tools (mcp.deviceTools: generic) every device is reached through device_call.
  const perDevice = tools.some(onDevice);
  return [
    ...(perDevice ? [mine.length ? `device ${bound}:` : `device ${bound}: no tools (offline, or not known here)`] : []),
    ...mine.map((t) => `  ${line(t.source?.tool ?? t.name, { ...t, description: t.description.replace(/^\[device [^\]]*\] /, '') })}`),
    ...others.map((t) => line(t.name, t)),
    ...(hidden ? [`(${hidden} tool${hidden === 1 ? '' : 's'} of other devices not shown: /tools all)`] : []),
  ];
}

/** What a question waiting for a line gets when Ctrl-C abandons it. */
const INTERRUPTED = Symbol('interrupted');
/** What a confirmation question gets when the gateway's confirmation window closes first. */
const TIMED_OUT = Symbol('timed out');

// eslint-disable-next-line max-lines-per-function -- the REPL's commands share its state (model, device, conversation); each command is a few lines
export async function runChat(o: ChatOptions): Promise<number> {
  const api = new GatewayClient(o.url.replace(/\/+$/, ''), o.key);
  // What the gateway sends (answers, tool names and descriptions, devices' names, errors) may carry a device's, a
  // tool's or a model's terminal escapes: the terminal shows them, never obeys them.
  const out = (s: string) => o.output.write(forTerminal(s));
  const info = (s: string) => o.errors.write(`${forTerminal(s)}\n`);
  const state = { conversationId: undefined as string | undefined, model: o.model, device: o.device, resources: [] as string[] };
  let running: { turnId?: string; ac: AbortController; cancelling: boolean } | undefined;

  const rl = createInterface({ input: o.input, output: o.interactive ? o.output : undefined, terminal: o.interactive });
  // Our own line queue (not rl's async iterator): a question that Ctrl-C abandons must not swallow the
  // next line typed, and piped input that arrives early is kept in order.
  const typed: string[] = [];
  let waiter: ((line: string | typeof INTERRUPTED | undefined) => void) | undefined;
  let inputEnded = false;
  rl.on('line', (line) => {
    const w = waiter;
    waiter = undefined;
    if (w) w(line);
    else typed.push(line);
  });
  rl.on('close', () => {
    inputEnded = true;
    const w = waiter;
    waiter = undefined;
    w?.(undefined);
  });
  const nextLine = (prompt: string): Promise<string | typeof INTERRUPTED | undefined> => {
    if (o.interactive) {
      rl.setPrompt(forTerminal(prompt));
      rl.prompt();
    }
    if (typed.length) return Promise.resolve(typed.shift());
    if (inputEnded) return Promise.resolve(undefined);
    return new Promise((resolve) => (waiter = resolve));
  };
  /**
   * A question the gateway stops waiting for after `ms`: past that its answer would be refused, so the
   * question is abandoned (the next line typed is a new message) instead of waiting for a keypress.
   */
  const nextLineWithin = async (prompt: string, ms: number): Promise<string | typeof INTERRUPTED | typeof TIMED_OUT | undefined> => {
    const asked = nextLine(prompt);
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<typeof TIMED_OUT>((resolve) => (timer = setTimeout(() => resolve(TIMED_OUT), ms)));
    const answer = await Promise.race([asked, expired]);
    clearTimeout(timer);
    if (answer === TIMED_OUT) waiter = undefined;
    return answer;
  };
  /** Ctrl-C while a y/N question waits: the question is answered "no" (true when one was waiting). */
  const interruptQuestion = (): boolean => {
    const w = waiter;
    if (!w || !running) return false;
    waiter = undefined;
    w(INTERRUPTED);
    return true;
  };

  let exitCode: number | undefined;
  const onInterrupt = () => {
    // Ctrl-C at a y/N question answers "no" and cancels the turn; it never quits.
    const atQuestion = interruptQuestion();
    if (atQuestion && o.interactive) out('\n');
    if (running && (atQuestion || !running.cancelling)) {
      if (running.cancelling) return;
      running.cancelling = true;
      info('[cancelling the turn; Ctrl-C again to quit]');
      if (running.turnId) void api.request('DELETE', `/v1/assistant/turns/${running.turnId}`).catch(() => undefined);
      else running.ac.abort();
      return;
    }
    exitCode = 130;
    running?.ac.abort();
    rl.close();
    process.exit(130);
  };
  process.on('SIGINT', onInterrupt);
  rl.on('SIGINT', onInterrupt);

  /** One turn, streamed. Returns whether it completed. */
  // eslint-disable-next-line max-lines-per-function -- one streamed turn and its confirmations share the REPL's state
  const turn = async (body: Record<string, unknown>): Promise<boolean> => {
    const ac = new AbortController();
    running = { ac, cancelling: false };
    let answering = false;
    let ok = false;
    const payload = {
      ...body,
      conversationId: state.conversationId,
      model: state.model,
      deviceId: state.device,
      resources: state.resources.length ? state.resources : undefined,
    };
    state.resources = [];
    try {
      await api.turn(payload, ac.signal, async (e: TurnEventData) => {
        const endAnswer = () => {
          if (answering) out('\n');
          answering = false;
        };
        switch (e.type) {
          case 'turn.started':
            running!.turnId = String(e['turnId']);
            state.conversationId = String(e['conversationId']);
            break;
          case 'resource.read':
            info(`[MCP: Fetched resource: ${String(e['uri'])}]`);
            break;
          case 'prompt.used':
            info(`[MCP: Using prompt template '${String(e['name'])}' from server '${String(e['server'])}']`);
            break;
          case 'tool.calls':
            endAnswer();
            info(`[MCP: Detected ${Number(e['count'])} tool call${e['count'] === 1 ? '' : 's'}]`);
            break;
          case 'tool.call':
            endAnswer();
            info(`[MCP: Calling tool '${String(e['name'])}']`);
            break;
          case 'tool.result':
            info(
              e['isError']
                ? `[MCP: Tool '${String(e['name'])}' failed: ${String(e['text']).split('\n')[0]!.slice(0, 200)}]`
                : `[MCP: Tool '${String(e['name'])}' completed]`,
            );
            break;
          case 'confirmation.required': {
            endAnswer();
            const question = `Run '${String(e['name'])}' with ${JSON.stringify(e['arguments'])}? [y/N] `;
            const windowMs = typeof e['timeoutMs'] === 'number' && e['timeoutMs'] > 0 ? e['timeoutMs'] : undefined;
            const answer = o.interactive || !o.message ? await (windowMs ? nextLineWithin(question, windowMs) : nextLine(question)) : undefined;
            // Ctrl-C at the question: "no", and the turn is being cancelled (onInterrupt), so nothing to record.
            if (answer === INTERRUPTED) break;
            // The gateway has already answered "not confirmed"; say so and go on with the turn's events.
            if (answer === TIMED_OUT) {
              if (o.interactive) out('\n');
              info(`[no answer within ${Math.round(windowMs! / 1000)} s: '${String(e['name'])}' not run]`);
              break;
            }
            const approve = /^y(es)?$/i.test((answer ?? '').trim());
            if (!o.interactive) info(`[confirm '${String(e['name'])}': ${approve ? 'yes' : 'no'}]`);
            await api
              .request('POST', `/v1/assistant/turns/${running!.turnId}/confirmations/${encodeURIComponent(String(e['callId']))}`, { approve })
              .catch((err: unknown) => info(`[confirmation not recorded: ${(err as Error).message}]`));
            break;
          }
          case 'text.delta':
            if (!answering) out('◆ ');
            answering = true;
            out(String(e['text']));
            break;
          case 'turn.completed':
            endAnswer();
            ok = true;
            break;
          case 'turn.failed':
            endAnswer();
            info(e['code'] === 'CANCELLED' ? '[turn cancelled]' : `[error ${String(e['code'])}: ${String(e['detail'])}]`);
            break;
        }
      });
    } catch (err) {
      if (ac.signal.aborted) info('[turn cancelled]');
      else info(err instanceof ApiError ? `[error ${err.code}: ${err.message}]` : `[error: ${(err as Error).message}]`);
      // An expired conversation would fail every later message: the next one starts afresh.
      if (err instanceof ApiError && err.code === 'NOT_FOUND' && payload.conversationId) {
        state.conversationId = undefined;
        info('[the conversation is gone; the next message starts a new one]');
      }
    } finally {
      running = undefined;
    }
    return ok;
  };

  const command = async (line: string): Promise<boolean> => {
    const [cmd, ...rest] = line.trim().split(/\s+/);
    const arg = rest.join(' ');
    try {
      switch (cmd) {
        case '/help':
          info(HELP);
          return true;
        case '/quit':
        case '/exit':
          return false;
        case '/new':
          state.conversationId = undefined;
          info('[new conversation]');
          return true;
        case '/model':
          if (arg) {
            state.model = arg;
            info(`[model: ${arg}]`);
          } else {
            const r = await api.request<{ models: Array<{ name: string; provider: string; toolMode: string; default: boolean }> }>(
              'GET',
              '/v1/assistant/models',
            );
            for (const m of r.models)
              info(`${m.name === (state.model ?? '') || (!state.model && m.default) ? '*' : ' '} ${m.name}  (${m.provider}, ${m.toolMode})`);
          }
          return true;
        case '/device':
          state.device = arg || undefined;
          info(arg ? `[bound to device ${arg}]` : '[not bound to a device]');
          return true;
        case '/devices': {
          const r = await api.request<{ devices: Array<{ id: string; online: boolean; transport: string }> }>('GET', '/v1/devices');
          for (const d of r.devices) info(`${d.id}  ${d.online ? 'online' : 'offline'}  ${d.transport}`);
          if (!r.devices.length) info('(no devices)');
          return true;
        }
        case '/tools': {
          const r = await api.request<{ tools: ListedTool[] }>('GET', '/v1/tools');
          for (const l of toolLines(r.tools, arg === 'all' ? undefined : state.device)) info(l);
          return true;
        }
        case '/resource':
          if (!arg) info('usage: /resource <uri>');
          else {
            state.resources.push(arg);
            info(`[will attach ${arg} to the next message]`);
          }
          return true;
        case '/prompt': {
          const [name, ...pairs] = rest;
          if (!name) {
            info('usage: /prompt <name> [k=v ...]');
            return true;
          }
          const args = Object.fromEntries(
            pairs.map((p) => {
              const i = p.indexOf('=');
              return i === -1 ? [p, ''] : [p.slice(0, i), p.slice(i + 1)];
            }),
          );
          await turn({ prompt: { name, arguments: args } });
          return true;
        }
        default:
          info(`unknown command ${cmd}; /help lists them`);
          return true;
      }
    } catch (err) {
      info(err instanceof ApiError ? `[error ${err.code}: ${err.message}]` : `[error: ${(err as Error).message}]`);
      return true;
    }
  };

  try {
    if (o.message !== undefined) return (await turn({ message: o.message })) ? 0 : 1;
    if (o.interactive) info(`Voxgate chat at ${o.url}. /help for commands, Ctrl-C cancels a turn.`);
    for (;;) {
      const line = await nextLine('> ');
      if (line === undefined) break;
      if (line === INTERRUPTED) continue;
      if (!line.trim()) continue;
      if (line.trim().startsWith('/')) {
        if (!(await command(line))) break;
        continue;
      }
      await turn({ message: line });
    }
    return exitCode ?? 0;
  } finally {
    process.off('SIGINT', onInterrupt);
    rl.close();
  }
}
