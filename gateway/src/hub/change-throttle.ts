import { ThrottledLog, type LevelLog } from '../throttle/throttled-log.js';

/** How often one server's changes are passed on at most. */
export const CHANGE_WINDOW_MS = 1000;

/**
 * One server's announcements of change (its prompts or resources, its tools, its comings and goings) passed on at most
 * once per `windowMs`: the first at once, any more within the window as one at its end, so the last change is always
 * told. Every `/mcp` session of every tenant hears of a change (TickSignal only merges those of one event-loop turn):
 * a tool process dialed in with one tenant's endpoint token, announcing `prompts/list_changed` 500 times a second (its
 * frame rate bound), or reconnecting in a loop, made each of them hear 1000 notifications a second, and re-list.
 * `onHeld` is told of each announcement merged into a later one.
 */
export function throttleChanges(fire: () => void, onHeld: () => void, windowMs = CHANGE_WINDOW_MS, now: () => number = Date.now): () => void {
  let openAt = 0;
  let timer: NodeJS.Timeout | undefined;
  return () => {
    const t = now();
    if (timer === undefined && t >= openAt) {
      openAt = t + windowMs;
      fire();
      return;
    }
    onHeld();
    if (timer !== undefined) return;
    timer = setTimeout(
      () => {
        timer = undefined;
        openAt = now() + windowMs;
        fire();
      },
      Math.max(0, openAt - t),
    );
    timer.unref();
  };
}

/** Each server's changes throttled apart (throttleChanges); the merged ones counted, and logged once a minute per server. */
export class ServerChangeThrottles {
  private readonly lines: ThrottledLog;

  constructor(
    log: LevelLog,
    private readonly held: { inc(): void },
    private readonly windowMs = CHANGE_WINDOW_MS,
  ) {
    this.lines = new ThrottledLog(log, 'warn', { linesPerWindow: 1, windowMs: 60_000, maxKeys: 1024 });
  }

  /** `fire`, at most once per window for this server's announcements. */
  for(server: string, fire: () => void): () => void {
    return throttleChanges(
      fire,
      () => {
        this.held.inc();
        this.lines.write({ server, windowMs: this.windowMs }, 'MCP server announces changes faster than mcp.changeWindowMs; passed on once per window', server);
      },
      this.windowMs,
    );
  }
}

/**
 * Hosted servers' `notifications/resources/updated`, passed on per resource at most once per window (throttleChanges:
 * the first at once, the last always told; the merged ones counted as held), and only for a resource some /mcp session
 * subscribed to: an update tells a subscriber to read the resource again, so a flood of them says no more than one.
 * Before, a tool process sent them at its frame rate (500 a second) and every subscribed session got each one, while
 * every session's listener was offered the updates of resources nobody subscribed to. One entry per subscribed
 * resource, dropped when its last subscription ends.
 */
export class ResourceUpdates {
  private readonly passes = new Map<string, () => void>();

  constructor(
    private readonly throttles: ServerChangeThrottles,
    private readonly subscribed: (server: string, uri: string) => boolean,
    private readonly emit: (server: string, uri: string) => void,
  ) {}

  updated(server: string, uri: string): void {
    if (!this.subscribed(server, uri)) return; // reaches no one
    const key = `${server}\0${uri}`;
    let pass = this.passes.get(key);
    if (!pass) this.passes.set(key, (pass = this.throttles.for(server, () => this.emit(server, uri))));
    pass();
  }

  /** The last subscription to the resource ended (an update still held goes out at its window's end, to no one). */
  forget(server: string, uri: string): void {
    this.passes.delete(`${server}\0${uri}`);
  }
}
