/**
 * Which allocation sites V8 decided to pretenure in a process, named by what they make. A process run with
 * `--trace-pretenuring-statistics` prints each decision with the site's address only ("AllocationSite(0x…): (created,
 * found, ratio) (n, m, r) undecided => tenure"); this reads those lines from its stdout and, at the end, asks gdb to
 * print each tenured site and its literal's boilerplate (`_v8_internal_Print_Object`, exported by node's binary; the
 * output goes to the process's own stdout, where it is read back). A site is an object literal (its keys, e.g.
 * `{ fired, wrapFn, target, type, listener }` is events.js's once-wrapper), an array literal, or an empty array's
 * `[]` / `new Array` ("array allocation", which only its elements kind names).
 *
 * Why it matters (docs/performance.md, "callgc", "callc1, second pass"): a tenured site's objects are made in the old generation;
 * one that points at a request's young objects keeps them across young collections (the scavenger treats old-to-young
 * pointers as roots), so a site tenured in a burst of long-lived objects (a fleet dialling in) and used by every call
 * afterwards promotes every call's objects.
 */
import { spawn } from 'node:child_process';
import type { Readable } from 'node:stream';

export interface Decision {
  site: string;
  created: number;
  found: number;
  from: string;
  to: string;
}

export interface TenuredSite {
  site: string;
  /** "object literal {a, b}", "array literal [n]", "array allocation (PACKED_ELEMENTS)", or what gdb could not say. */
  what: string;
  /** Each decision the trace printed for this site, in order. */
  decisions: Decision[];
}

/** An address as V8 prints it, with or without leading zeros, in one spelling. */
const addr = (a: string) => `0x${BigInt(a).toString(16)}`;

/** Where one printed object starts (a site, or a literal's boilerplate; not the strings and maps printed inside them). */
const BLOCK = /(?=0x[0-9a-f]+: \[(?:AllocationSite|JS_OBJECT_TYPE|JSArray)\])/;

const DECISION = /pretenuring: AllocationSite\((0x[0-9a-f]+)\): \(created, found, ratio\) \((\d+), (\d+), [\d.]+\) ([a-z' ]+?) => ([a-z' ]+)/;

/** Reads a process's stdout for pretenuring decisions (and, when asked, gdb's prints of its objects). */
export class PretenureTrace {
  readonly decisions: Decision[] = [];
  private text = '';
  private partial = '';
  private capturing = false;

  constructor(
    stdout: Readable | null | undefined,
    private readonly pid: number,
  ) {
    stdout?.on('data', (chunk: Buffer) => {
      const s = chunk.toString();
      if (this.capturing) this.text += s;
      const lines = (this.partial + s).split('\n');
      this.partial = lines.pop() ?? '';
      for (const line of lines) {
        const m = DECISION.exec(line);
        if (m) this.decisions.push({ site: addr(m[1]!), created: Number(m[2]), found: Number(m[3]), from: m[4]!, to: m[5]! });
      }
    });
  }

  /** The sites whose last decision is "tenure", each with what it makes (gdb attached for a moment). */
  async tenured(): Promise<TenuredSite[]> {
    const last = new Map<string, Decision[]>();
    for (const d of this.decisions) last.set(d.site, [...(last.get(d.site) ?? []), d]);
    const sites = [...last].filter(([, ds]) => ds[ds.length - 1]!.to === 'tenure').map(([site]) => site);
    if (sites.length === 0) return [];
    const printed = await this.print(sites);
    const boilerplates = new Map<string, string>();
    const what = new Map<string, string>();
    for (const block of printed.split(BLOCK)) {
      const head = /^(0x[0-9a-f]+): \[AllocationSite\]/.exec(block);
      if (!head) continue;
      const info = /transition_info: (.*)/.exec(block)?.[1] ?? '';
      const found = /boilerplate (0x[0-9a-f]+)/.exec(info)?.[1];
      const bp = found === undefined ? undefined : addr(found);
      if (bp) boilerplates.set(addr(head[1]!), bp);
      what.set(addr(head[1]!), bp ? info.replace(/ with boilerplate.*/, '') : info.replace('Array allocation with ElementsKind ', 'array allocation ').trim());
    }
    if (boilerplates.size > 0) {
      const shapes = await this.print([...boilerplates.values()]);
      const keysOf = new Map<string, string>();
      for (const block of shapes.split(BLOCK)) {
        const head = /^(0x[0-9a-f]+): \[(\w+)\]/.exec(block);
        if (!head) continue;
        const fast = [...block.matchAll(/: #([\w$]+): /g)].map((m) => m[1]!).filter((k) => k !== 'length');
        const dict = [...block.matchAll(/^ {3}([\w$]+): 0x/gm)].map((m) => m[1]!);
        const nullProto = /- prototype: 0x[0-9a-f]+ <null>/.test(block) ? ' (null prototype)' : '';
        const length = /<JSArray\[(\d+)\]>/.exec(block)?.[1];
        keysOf.set(addr(head[1]!), head[2] === 'JSArray' ? `[${length ?? '?'} items]` : `{ ${[...fast, ...dict].join(', ')} }${nullProto}`);
      }
      for (const [site, bp] of boilerplates) what.set(site, `${what.get(site) ?? ''} ${keysOf.get(bp) ?? bp}`.trim());
    }
    return sites.map((site) => ({ site, what: what.get(site) ?? '(not printed)', decisions: last.get(site)! }));
  }

  /** gdb prints each address with V8's object printer into the process's stdout; that part of it is returned. */
  private async print(addresses: string[]): Promise<string> {
    this.text = '';
    this.capturing = true;
    // V8's printer writes through the C library's buffered stdout: flushed before gdb lets the process go.
    const calls = [...addresses.flatMap((a) => ['-ex', `call (void)_Z25_v8_internal_Print_ObjectPv((void*)${a})`]), '-ex', 'call (int)fflush(0)'];
    // Not spawnSync: the process's stdout is a non-blocking pipe, and what does not fit in it while nobody reads is lost.
    const gdb = spawn('gdb', ['-p', String(this.pid), '-batch', '-nx', ...calls], { stdio: ['ignore', 'ignore', 'ignore'] });
    const code = await new Promise<number | null>((res, rej) => {
      gdb.once('error', (e) => rej(new Error(`gdb: ${e.message} (install gdb; ptrace must be allowed)`)));
      gdb.once('close', res);
    });
    if (code !== 0) throw new Error(`gdb exited with ${code}`);
    // The last of it reaches this process after gdb has let the other go.
    await new Promise((res) => setTimeout(res, 500));
    this.capturing = false;
    return this.text;
  }
}

/** One line per tenured site: what it makes and its decisions, "(created, found)" at each. */
export function describeTenured(sites: TenuredSite[]): string[] {
  return sites.map((s) => `${s.site} ${s.what}: ${s.decisions.map((d) => `(${d.created}, ${d.found}) ${d.from} => ${d.to}`).join('; ')}`);
}
