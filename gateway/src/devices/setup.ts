import { InitializeResultSchema, buildInitializeParams, referenceResultText, type InitializeResult, type VisionCapability } from '@voxgate/protocol';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { GatewayError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import type { BadInputLog } from './bad-input-log.js';
import type { CallQueue } from './call-queue.js';
import { capGap, cutToBytes, holdOrRefuse } from './catalog-bounds.js';
import type { CatalogHolder } from './catalog-budget.js';
import { ToolCatalog } from './catalog.js';
import { resultTail, type PageReader } from './page-reader.js';
import { PendingRequest, type RawReplyReader, type RpcChannel } from './rpc-channel.js';
import type { SessionSettings, SessionState, SetupProgress } from './settings.js';
import type { CachedPage, ToolsPageCache } from './tools-page-cache.js';
import { lastToolName, toolsOf, ToolsWalk } from './tools-walk.js';

/** Least time between two walks of one device's list when list_changed keeps coming (see `relist`). */
export const RELIST_GAP_MS = 1000;

export interface SetupDeps {
  deviceId: string;
  log: Logger;
  /** The device's bad-input lines, for what its pages list wrong (page-reader.ts); read only to write. */
  readonly badInput: Pick<BadInputLog, 'note'>;
  metrics: Metrics;
  settings: SessionSettings;
  channel: RpcChannel;
  queue: CallQueue;
  /** The tools/list page cache every walk reads through (a fresh PageReader per walk, with these deps as its context). */
  pages: ToolsPageCache;
  transport: 'websocket' | 'mqtt';
  /** Minted per (re)initialize: the vision token expires. */
  vision: () => VisionCapability | undefined;
  /**
   * The session's state: 'closed' ends every retry; progress is reported while 'initializing'. `initialize` is set by
   * `setup()` as soon as the device answered it (the device summary shows it while the tools are listed).
   */
  session: CatalogHolder & { readonly state: SessionState; initialize?: InitializeResult | undefined };
}

/**
 * Where a catalog stops short: a page the device refused with an answer that cannot change (the walk stopped there),
 * or a byte bound (`session.maxCatalogBytes` cut it, `devices.catalogBudgetBytes` refused it).
 */
export interface CatalogGap {
  /** The first page not wholly kept (1-based). */
  page: number;
  /** The last tool kept before it, if any. */
  after: string | undefined;
  /** The device's error, or the bound's. */
  error: string;
  /** What operators are shown (the device summary, the console's badge). */
  warning: string;
}

/** The result of one tools/list walk. */
export interface ListedTools {
  catalog: ToolCatalog;
  /** Set when the device refused a page for good: the catalog holds the pages before it. */
  gap?: CatalogGap;
}

/**
 * A device's setup: initialize, the tools/list walk (its page reader, the page cache's fast path),
 * retries while the link is up, relisting after list_changed, and the vision token's refresh.
 */
export class DeviceSetup implements RawReplyReader {
  /** Set while a setup step is being retried; cleared by the session once the device is ready. */
  progress: SetupProgress | undefined;
  /** Ends a retry's backoff early when the link closes. */
  private retryWait: { timer: NodeJS.Timeout; wake: () => void } | undefined;
  private visionTimer: NodeJS.Timeout | undefined;
  private relisting = false;
  /** A list_changed came while relisting: read the list once more. */
  private relistAgain = false;
  /** When the last relist's walk began (RELIST_GAP_MS apart). */
  private walkedAt = 0;

  constructor(private readonly d: SetupDeps) {}

  /** Read afresh at each use (a method, so that no narrowing outlives an await). */
  private closed(): boolean {
    return this.d.session.state === 'closed';
  }

  /**
   * The whole setup, initialize then the tools/list walk, driven by the replies: each reply sends the next request
   * from the channel's callback (a `StepRequest`), so a device that answers every step at once costs one promise (the
   * one returned) instead of a promise, an async frame and a retry frame per round trip. The first step that fails
   * hands over to the retrying path (`initialize`, `walkFrom`), with that failure as its first attempt: the same
   * retries, backoff, progress, caps, warnings and errors as before. Sets `session.initialize` when it is answered.
   */
  setup(): Promise<ListedTools> {
    return new Promise((resolve, reject) => this.send(new SetupRun(resolve, reject)));
  }

  /** The run's next request: initialize, or its walk's next page. */
  private send(run: SetupRun): void {
    const { channel, settings } = this.d;
    const timeoutMs = settings.requestTimeoutMs;
    const walk = run.walk;
    try {
      if (walk === undefined) channel.requestFor(new StepRequest(this, run), 'initialize', this.initializeParams(), timeoutMs, timeoutMs, this);
      else channel.requestFor(new StepRequest(this, run), 'tools/list', walk.params(), timeoutMs, timeoutMs, walk.reader);
    } catch (e) {
      this.stepFailed(run, e);
    }
  }

  /** A reply to the run's request (`StepRequest`): read it, then send the next request or settle the run. */
  stepReplied(run: SetupRun, result: unknown): void {
    let walk = run.walk;
    let done: boolean;
    try {
      if (walk === undefined) {
        this.d.session.initialize = readInitialize(result);
        run.walk = walk = new ToolsWalk(this.d);
        return this.send(run);
      }
      done = walk.take(walk.reader.page(result, walk.page), this.d);
    } catch (e) {
      // What the retrying path's attempt would have thrown (a malformed result): that attempt failed.
      return this.stepFailed(run, e);
    }
    if (!done) return this.send(run);
    try {
      run.resolve(this.listed(walk, undefined));
    } catch (e) {
      run.reject(e);
    }
  }

  /** The run's request failed (`StepRequest`, or it could not be sent): the retrying path goes on from that step. */
  stepFailed(run: SetupRun, error: unknown): void {
    const failed = { error };
    const walk = run.walk;
    const rest = walk === undefined ? this.initializeThenList(failed) : this.walkFrom(walk, failed);
    rest.then(run.resolve, run.reject);
  }

  private async initializeThenList(failed: FailedAttempt): Promise<ListedTools> {
    this.d.session.initialize = await this.initialize(failed);
    return this.listTools();
  }

  /** Initialize, retried (`failed`: its first attempt, made by `setup()`, and how it failed). */
  initialize(failed?: FailedAttempt): Promise<InitializeResult> {
    const { settings } = this.d;
    return this.withRetry(
      'initialize',
      async () => readInitialize(await this.d.channel.request('initialize', this.initializeParams(), settings.requestTimeoutMs, { raw: this })),
      undefined,
      failed,
    );
  }

  private initializeParams(): Record<string, unknown> {
    return buildInitializeParams(this.d.settings.clientInfo, this.d.vision());
  }

  /**
   * The initialize reply, read from its text before the frame parser runs (the request's raw reader): a result
   * text already read and kept (`readInitialize`) is that same frozen result, with no parse of the frame and no
   * serialisation of the result. Any other text, or another layout, is not taken: the ordinary path reads it.
   */
  read(text: string, id: number): InitializeResult | undefined {
    const resultText = referenceResultText(text, resultTail(id));
    const known = resultText === undefined ? undefined : initResults.get(resultText);
    if (known !== undefined) this.d.metrics.hot.framesIn[this.d.transport].mcp.inc();
    return known;
  }

  /**
   * Walk `tools/list` while `nextCursor` is present, guarding against repeated cursors and endless pages.
   * A page that fails is asked for again (same cursor): the pages already fetched are kept. A page the
   * device refuses with a JSON-RPC error ends the walk: that answer cannot change (the firmware refuses a
   * page holding a tool larger than its page, and its cursor never moves past that tool).
   */
  listTools(): Promise<ListedTools> {
    return this.walkFrom(new ToolsWalk(this.d));
  }

  /** The walk from its current page on, each page retried (`failed`: that page's first attempt, made by `setup()`). */
  private async walkFrom(walk: ToolsWalk, failed?: FailedAttempt): Promise<ListedTools> {
    let gap: CatalogGap | undefined;
    for (;;) {
      const { page, reader } = walk;
      const params = walk.params();
      let p: CachedPage;
      try {
        p = await this.withRetry(`tools/list page ${page}`, () => this.requestPage(reader, params, page), refusedForGood, failed);
      } catch (e) {
        if (!refusedForGood(e) || this.closed()) throw e;
        gap = catalogGap(page, lastToolName(walk.pages), e.message);
        const logged = { page, after: gap.after, err: gap.error, tools: walk.count };
        this.d.log.warn(logged, 'the device refused a tools/list page; keeping the pages before it');
        break;
      }
      failed = undefined;
      if (walk.take(p, this.d)) break;
    }
    return this.listed(walk, gap);
  }

  private listed(walk: ToolsWalk, gap: CatalogGap | undefined): ListedTools {
    const { settings, deviceId } = this.d;
    let listed: ListedTools;
    if (walk.overBytes || walk.bytes > settings.maxCatalogBytes) listed = cutToBytes(walk, settings, deviceId);
    else {
      const catalog = this.catalogOf(walk.pages, walk.count);
      // A cap ends the walk, so a walk that ended on a refused page was cut by no cap: never both.
      gap ??= capGap(walk, settings, deviceId);
      listed = gap ? { catalog, gap } : { catalog };
    }
    // A closed session's close released what it held, and nothing more is held for it.
    return this.closed() ? listed : holdOrRefuse(listed, settings.catalogs, this.d.session, deviceId);
  }

  /**
   * Re-read the catalog after the device says it changed; undefined when it failed (the old one stays), and for a
   * notification that came while a relist ran: that relist reads the list once more when it is done, so a change
   * notified mid-walk is not lost. Walks begin RELIST_GAP_MS apart at least: a device that notifies without pause (a
   * red team's: after every tools/list reply) gets one walk a second instead of one per round trip.
   */
  async relist(): Promise<ListedTools | undefined> {
    if (this.relisting) {
      this.relistAgain = true;
      return undefined;
    }
    this.relisting = true;
    try {
      let listed: ListedTools | undefined;
      do {
        const wait = this.walkedAt + RELIST_GAP_MS - Date.now();
        if (wait > 0) await sleep(wait, undefined, { ref: false });
        if (this.closed()) return undefined;
        this.relistAgain = false;
        this.walkedAt = Date.now();
        listed = await this.listTools();
      } while (this.relistAgain && !this.closed());
      return listed;
    } catch (e) {
      this.d.log.warn({ err: e instanceof Error ? e.message : String(e) }, 'tools/list after list_changed failed; keeping the old catalog');
      return undefined;
    } finally {
      this.relisting = false;
    }
  }

  /**
   * The vision token is minted with an expiry, so a long-lived (MQTT) device would lose vision one token
   * lifetime after connecting. The firmware accepts a repeated initialize and takes the new URL and token
   * from it; it goes through the call queue, so it never overlaps a call in flight.
   */
  scheduleVisionRefresh(afterMs: number | undefined): void {
    if (afterMs === undefined || this.closed()) return;
    clearTimeout(this.visionTimer);
    this.visionTimer = setTimeout(() => void this.refreshVision(), afterMs);
  }

  /** Nothing running nor scheduled: the session may drop this object and make another when it needs one. */
  get idle(): boolean {
    return this.visionTimer === undefined && this.retryWait === undefined && !this.relisting && this.progress === undefined;
  }

  /** The link closed: no more retries or refreshes. */
  close(): void {
    clearTimeout(this.visionTimer);
    if (this.retryWait) {
      clearTimeout(this.retryWait.timer);
      this.retryWait.wake();
    }
  }

  private catalogOf(pages: CachedPage[], count: number): ToolCatalog {
    const max = this.d.settings.maxTools;
    if (count <= max) return ToolCatalog.fromPages(pages, () => toolsOf(pages));
    const tools = toolsOf(pages);
    tools.length = max;
    return ToolCatalog.from(tools);
  }

  private async refreshVision(): Promise<void> {
    const vision = this.d.vision();
    if (!vision || this.closed()) return;
    this.d.log.debug('vision token refresh queued');
    const { settings } = this.d;
    const timeoutMs = settings.requestTimeoutMs;
    try {
      // Queued like a call, with room to wait behind the longest call the device may be running.
      await this.d.queue.enqueue(Date.now() + settings.calls.maxTimeoutMs + timeoutMs, (remaining) =>
        this.d.channel.request('initialize', buildInitializeParams(settings.clientInfo, vision), Math.min(remaining, timeoutMs)),
      );
      this.d.log.debug('vision token refreshed');
      this.scheduleVisionRefresh(settings.visionRefreshMs);
    } catch (e) {
      if (this.closed()) return; // closed while queued
      this.d.log.warn({ err: e instanceof Error ? e.message : String(e) }, 'vision token refresh failed; retrying');
      this.scheduleVisionRefresh(settings.setupRetryMaxMs);
    }
  }

  /** One tools/list page, validated, from the page cache when another device already sent the same text. */
  private async requestPage(reader: PageReader, params: Record<string, unknown>, page: number): Promise<CachedPage> {
    const reply = await this.d.channel.request('tools/list', params, this.d.settings.requestTimeoutMs, { raw: reader });
    return reader.page(reply, page);
  }

  /**
   * One setup step, retried with backoff while the link is up. The firmware answers only from its main
   * task, so a long tool or a voice-session wait delays a reply past any fixed timeout: timeouts are
   * retried for as long as the device stays connected; other failures up to `setupMaxErrors` times, and
   * an answer that cannot change (`final`) not at all.
   */
  private async withRetry<T>(step: string, run: () => Promise<T>, final: (e: unknown) => boolean = () => false, failed?: FailedAttempt): Promise<T> {
    let errors = 0;
    for (let attempt = 1; ; attempt++) {
      try {
        if (failed !== undefined) {
          // The first attempt was made on setup()'s reply-driven path: it failed with this.
          const { error } = failed;
          failed = undefined;
          throw error;
        }
        return await run();
      } catch (e) {
        if (this.closed() || final(e)) throw e;
        const timedOut = e instanceof GatewayError && e.code === 'DEVICE_TIMEOUT';
        if (!timedOut && ++errors >= this.d.settings.setupMaxErrors) throw e;
        await this.backoff(step, attempt, e);
        if (this.closed()) throw this.d.channel.offline(); // closed during the wait
      }
    }
  }

  private async backoff(step: string, attempt: number, e: unknown): Promise<void> {
    const { setupRetryMinMs: min, setupRetryMaxMs: max } = this.d.settings;
    const waitMs = Math.min(max, min * 2 ** Math.min(attempt - 1, 20));
    const lastError = e instanceof Error ? e.message : String(e);
    if (this.d.session.state === 'initializing') this.progress = { step, attempt, lastError, retryAt: Date.now() + waitMs };
    this.d.metrics.setupRetries.inc({ step: step.startsWith('tools/list') ? 'tools_list' : 'initialize' });
    this.d.log.warn({ step, attempt, err: lastError, retryInMs: waitMs }, 'device setup step failed; retrying while the link is up');
    await new Promise<void>((wake) => {
      this.retryWait = { timer: setTimeout(wake, waitMs), wake };
    });
    this.retryWait = undefined;
  }
}

/** A setup step's first attempt, made on the reply-driven path, and how it failed. */
interface FailedAttempt {
  error: unknown;
}

/** One `setup()`: how it ends, and its walk once initialize is answered (undefined: initialize is the step). */
class SetupRun {
  walk: ToolsWalk | undefined;
  constructor(
    readonly resolve: (listed: ListedTools) => void,
    readonly reject: (err: unknown) => void,
  ) {}
}

/** One request of a `setup()` run: its outcome goes to the run's next step (one object per request, as the channel asks). */
class StepRequest extends PendingRequest {
  constructor(
    private readonly setup: DeviceSetup,
    private readonly run: SetupRun,
  ) {
    super();
  }

  resolve(result: unknown): void {
    this.setup.stepReplied(this.run, result);
  }

  reject(err: GatewayError): void {
    this.setup.stepFailed(this.run, err);
  }
}

/** Initialize results kept by their JSON text: bounded in count, and only short texts are kept. */
const MAX_INIT_RESULTS = 64;
const MAX_INIT_TEXT = 4096;
const initResults = new Map<string, InitializeResult>();
/** Every result kept (frozen): what the raw reader returns needs no second look. */
const keptResults = new WeakSet<object>();

/**
 * An initialize result, validated. A firmware's devices answer initialize alike, and each device kept its
 * own copy of the same result (~230 B each): a result already seen (by its JSON text) is the same frozen
 * object, the validated parse of that text, so the schema runs once per distinct answer.
 */
function readInitialize(raw: unknown): InitializeResult {
  if (typeof raw === 'object' && raw !== null && keptResults.has(raw)) return raw as InitializeResult;
  const text = JSON.stringify(raw);
  const known = text === undefined ? undefined : initResults.get(text);
  if (known) return known;
  const result = InitializeResultSchema.parse(raw);
  if (text === undefined || text.length > MAX_INIT_TEXT) return result;
  if (initResults.size >= MAX_INIT_RESULTS) initResults.delete(initResults.keys().next().value!);
  initResults.set(text, deepFreeze(result));
  keptResults.add(result);
  return result;
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/** The device answered with a JSON-RPC error: asking again with the same cursor gets the same answer. */
function refusedForGood(e: unknown): e is GatewayError {
  return e instanceof GatewayError && e.code === 'DEVICE_ERROR' && e.extra['rpcCode'] !== undefined;
}

/** A device error is bounded before it is kept in the summary, the event and the log. */
const MAX_GAP_ERROR = 200;

function catalogGap(page: number, after: string | undefined, error: string): CatalogGap {
  const warning =
    after === undefined
      ? 'catalog incomplete: the first tools/list page was refused by the device'
      : `catalog incomplete: tool after ${after} refused by the device`;
  return { page, after, error: error.length > MAX_GAP_ERROR ? `${error.slice(0, MAX_GAP_ERROR)}…` : error, warning };
}
