import type { CallToolResult, Tool } from '@modelcontextprotocol/client';
import type { BUILTIN_TOOL_NAMES } from './config.js';

/** Tools implemented in the gateway itself: no process, no network. */
type BuiltinName = (typeof BUILTIN_TOOL_NAMES)[number];

/**
 * What `fleet_start_job` needs of the fleet (a port: the hub does not import fleet/, the composition root
 * plugs it in). `start` takes the body of POST /v1/jobs, validates it as that route does, and answers the
 * job; it throws a GatewayError for what it refuses.
 */
export interface FleetJobsPort {
  start(body: Record<string, unknown>, principal?: string): Promise<{ id: string; state: string; total: number }>;
}

export interface BuiltinContext {
  fleetJobs?: FleetJobsPort | undefined;
  /** The caller is an operator (principal.ts isOperator): no tenant, and not limited to devices without one. */
  operator?: boolean | undefined;
  /** The caller's key (principal.ts): a job it starts runs only while that key is configured (fleet/key-grants.ts). */
  principal?: string | undefined;
}

interface Builtin {
  tool: Tool;
  run(args: Record<string, unknown>, ctx?: BuiltinContext): CallToolResult | Promise<CallToolResult>;
}

const text = (t: string, isError = false): CallToolResult => ({ content: [{ type: 'text', text: t }], ...(isError ? { isError: true } : {}) });

const JOB_FILTER_SCHEMA = {
  type: 'object',
  description: 'Which devices: every field given must match; at least one field',
  properties: {
    tags: { type: 'array', items: { type: 'string', maxLength: 32 }, maxItems: 32, description: 'the device has all these tags' },
    room: { type: 'string', maxLength: 64 },
    firmware: { type: 'string', maxLength: 64, description: 'firmware version, exactly' },
    board: { type: 'string', maxLength: 64, description: 'board name, exactly' },
    ids: { type: 'array', items: { type: 'string', maxLength: 64 }, maxItems: 10_000, description: 'device ids (MAC addresses)' },
  },
  additionalProperties: false,
};

const BUILTINS: Record<BuiltinName, Builtin> = {
  fleet_start_job: {
    tool: {
      name: 'fleet_start_job',
      description:
        'Start a fleet job: run one device tool, with the same arguments, on every device the filter selects (offline devices get it ' +
        'when they come back). It changes many devices at once: ask the person before using it. Answers the job id and how many devices it reaches.',
      inputSchema: {
        type: 'object',
        properties: {
          tool: { type: 'string', minLength: 1, maxLength: 128, description: "the devices' tool name, e.g. self.audio_speaker.set_volume" },
          arguments: { type: 'object', description: "the tool's arguments" },
          filter: JOB_FILTER_SCHEMA,
          concurrency: { type: 'integer', minimum: 1, maximum: 10_000, description: 'calls at once (default 10)' },
          abortOverPercent: { type: 'number', minimum: 0, maximum: 100, description: 'stop when more than this % of finished calls failed' },
        },
        required: ['tool', 'filter'],
        additionalProperties: false,
      },
      annotations: { destructiveHint: true, readOnlyHint: false, openWorldHint: true },
    },
    async run(args, ctx) {
      if (!ctx?.fleetJobs) return text('fleet jobs are not available on this gateway', true);
      // A job's filter selects devices across tenants (POST /v1/jobs is for operator keys: a tenant's key gets 403).
      if (ctx.operator === false) return text('fleet jobs are for operators: a caller of a tenant (or a device) cannot start one', true);
      try {
        const job = await ctx.fleetJobs.start(args, ctx.principal);
        const out = { jobId: job.id, state: job.state, devices: job.total };
        return { content: [{ type: 'text', text: JSON.stringify(out) }], structuredContent: out };
      } catch (e) {
        return text(`the job was not started: ${e instanceof Error ? e.message.slice(0, 1000) : String(e)}`, true);
      }
    },
  },
  current_time: {
    tool: {
      name: 'current_time',
      description: 'The current date and time, in a time zone (IANA name such as "Asia/Tokyo"; default UTC).',
      inputSchema: {
        type: 'object',
        properties: { timezone: { type: 'string', maxLength: 64, description: 'IANA time zone, e.g. "Asia/Tokyo", "Europe/Paris", "UTC"' } },
        additionalProperties: false,
      },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    run(args) {
      const tz = typeof args['timezone'] === 'string' && args['timezone'] ? args['timezone'] : 'UTC';
      const now = new Date();
      let parts: Intl.DateTimeFormatPart[];
      try {
        parts = new Intl.DateTimeFormat('en-CA', {
          timeZone: tz,
          year: 'numeric',
          month: '2-digit',
          day: '2-digit',
          hour: '2-digit',
          minute: '2-digit',
          second: '2-digit',
          hourCycle: 'h23',
          weekday: 'long',
          timeZoneName: 'longOffset',
        }).formatToParts(now);
      } catch {
        return text(`unknown time zone "${tz.slice(0, 64)}"; use an IANA name such as "Asia/Tokyo" or "UTC"`, true);
      }
      const p = (t: Intl.DateTimeFormatPartTypes) => parts.find((x) => x.type === t)?.value ?? '';
      const offset = p('timeZoneName').replace(/^GMT/, '') || '+00:00';
      const local = `${p('year')}-${p('month')}-${p('day')}T${p('hour')}:${p('minute')}:${p('second')}${offset === '' ? 'Z' : offset}`;
      const out = { timezone: tz, local, utc: now.toISOString(), weekday: p('weekday'), utcOffset: offset };
      return { content: [{ type: 'text', text: JSON.stringify(out) }], structuredContent: out };
    },
  },
  calculator: {
    tool: {
      name: 'calculator',
      description:
        'Evaluates an arithmetic expression exactly as written: + - * / % ^ (power), parentheses, unary minus, ' +
        'functions sqrt abs round floor ceil min max log ln exp sin cos tan, constants pi and e.',
      inputSchema: {
        type: 'object',
        properties: { expression: { type: 'string', minLength: 1, maxLength: 1000, description: 'e.g. "(2 + 3) * 4 ^ 2"' } },
        required: ['expression'],
        additionalProperties: false,
      },
      annotations: { readOnlyHint: true, openWorldHint: false, idempotentHint: true },
    },
    run(args) {
      const expr = args['expression'];
      if (typeof expr !== 'string' || expr.length === 0 || expr.length > 1000) return text('"expression" must be a string of 1-1000 characters', true);
      try {
        const value = evaluate(expr);
        return { content: [{ type: 'text', text: String(value) }], structuredContent: { expression: expr, value } };
      } catch (e) {
        return text(`cannot evaluate: ${(e as Error).message}`, true);
      }
    },
  },
};

export function builtinTool(name: BuiltinName, description?: string): Builtin {
  const b = BUILTINS[name];
  return description === undefined ? b : { ...b, tool: { ...b.tool, description } };
}

const FUNCS: Record<string, { arity: [number, number]; fn: (...a: number[]) => number }> = {
  sqrt: { arity: [1, 1], fn: Math.sqrt },
  abs: { arity: [1, 1], fn: Math.abs },
  round: { arity: [1, 1], fn: Math.round },
  floor: { arity: [1, 1], fn: Math.floor },
  ceil: { arity: [1, 1], fn: Math.ceil },
  log: { arity: [1, 1], fn: Math.log10 },
  ln: { arity: [1, 1], fn: Math.log },
  exp: { arity: [1, 1], fn: Math.exp },
  sin: { arity: [1, 1], fn: Math.sin },
  cos: { arity: [1, 1], fn: Math.cos },
  tan: { arity: [1, 1], fn: Math.tan },
  min: { arity: [1, 64], fn: Math.min },
  max: { arity: [1, 64], fn: Math.max },
};
const CONSTS: Record<string, number> = { pi: Math.PI, e: Math.E };

/**
 * A recursive-descent evaluator (no `eval`, no `Function`): numbers, identifiers from fixed tables only.
 *   expr := term (('+'|'-') term)* ; term := unary (('*'|'/'|'%') unary)* ;
 *   unary := ('-'|'+') unary | power ; power := atom ('^' unary)? ; atom := number | name | name '(' args ')' | '(' expr ')'
 */
// eslint-disable-next-line max-lines-per-function -- the calculator's grammar in one recursive-descent function: one small case per rule
export function evaluate(src: string): number {
  const tokens = src.match(/\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|[A-Za-z_]+|\*\*|[-+*/%^(),]|\S/g) ?? [];
  let i = 0;
  let depth = 0;
  const peek = () => tokens[i];
  const take = (t?: string) => {
    const v = tokens[i];
    if (t !== undefined && v !== t) throw new Error(v === undefined ? `expected "${t}" at the end` : `expected "${t}" but found "${v}"`);
    i++;
    return v;
  };
  const expr = (): number => {
    if (++depth > 200) throw new Error('expression nested too deeply');
    let v = term();
    while (peek() === '+' || peek() === '-') v = take() === '+' ? v + term() : v - term();
    depth--;
    return v;
  };
  const term = (): number => {
    let v = unary();
    for (;;) {
      const op = peek();
      if (op === '*') {
        take();
        v *= unary();
      } else if (op === '/') {
        take();
        const d = unary();
        if (d === 0) throw new Error('division by zero');
        v /= d;
      } else if (op === '%') {
        take();
        const d = unary();
        if (d === 0) throw new Error('modulo by zero');
        v %= d;
      } else return v;
    }
  };
  const unary = (): number => {
    if (++depth > 200) throw new Error('expression nested too deeply');
    let v: number;
    if (peek() === '-') {
      take();
      v = -unary();
    } else if (peek() === '+') {
      take();
      v = unary();
    } else v = power();
    depth--;
    return v;
  };
  const power = (): number => {
    const base = atom();
    if (peek() === '^' || peek() === '**') {
      take();
      return Math.pow(base, unary());
    }
    return base;
  };
  const atom = (): number => {
    const t = take();
    if (t === undefined) throw new Error('unexpected end of expression');
    if (/^[\d.]/.test(t)) {
      const n = Number(t);
      if (!Number.isFinite(n)) throw new Error(`bad number "${t}"`);
      return n;
    }
    if (t === '(') {
      const v = expr();
      take(')');
      return v;
    }
    if (/^[A-Za-z_]+$/.test(t)) {
      const name = t.toLowerCase();
      if (peek() === '(') {
        const f = Object.hasOwn(FUNCS, name) ? FUNCS[name] : undefined;
        if (!f) throw new Error(`unknown function "${t}"`);
        take('(');
        const args = [expr()];
        while (peek() === ',') {
          take();
          args.push(expr());
        }
        take(')');
        if (args.length < f.arity[0] || args.length > f.arity[1])
          throw new Error(`${name} takes ${f.arity[0] === f.arity[1] ? f.arity[0] : `${f.arity[0]}-${f.arity[1]}`} argument(s)`);
        return f.fn(...args);
      }
      if (Object.hasOwn(CONSTS, name)) return CONSTS[name]!;
      throw new Error(`unknown name "${t}"`);
    }
    throw new Error(`unexpected "${t}"`);
  };
  if (tokens.length === 0) throw new Error('empty expression');
  const v = expr();
  if (i < tokens.length) throw new Error(`unexpected "${tokens[i]}"`);
  if (!Number.isFinite(v)) throw new Error('the result is not a finite number');
  return v;
}
