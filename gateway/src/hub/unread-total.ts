import type { LevelLog } from '../throttle/throttled-log.js';
import { ThrottledLog } from '../throttle/throttled-log.js';
import { bindCounter, bindGauge, type BoundCounter, type BoundGauge } from '../metrics-bound.js';
import type { Metrics } from '../metrics.js';

/**
 * One peer's part of the gateway's unread total: the bytes of the messages the gateway wrote it that its socket or
 * pipe has not taken yet (counted from the write until the write's callback).
 */
export interface UnreadShare {
  /** Count `bytes` about to be written: false when the total has no room for them (nothing counted: do not write). */
  take(bytes: number): boolean;
  /** Bytes taken before have left the gateway (the socket or pipe took them, or dropped them with itself). */
  give(bytes: number): void;
  /** The peer is gone: what it held no longer counts (its socket or pipe, destroyed, dropped it). */
  leave(): void;
}

/**
 * Where a peer counts: its group, whose holdings are compared (the tool processes of one tenant together, the
 * operators' as one; each hosted server on its own), and who it is in the log lines.
 */
export interface UnreadPlace {
  total: UnreadTotal;
  group: string;
  who: Record<string, unknown>;
}

interface Group {
  readonly key: string;
  held: number;
  readonly members: Set<Member>;
}

interface Member {
  held: number;
  gone: boolean;
  readonly group: Group;
  readonly who: Record<string, unknown>;
  /** Drop what waits for the peer with its connection (a WebSocket cut, a stdio server's pipe and process). */
  readonly cut: (() => void) | undefined;
}

/**
 * The total unless `mcp.unreadBudgetBytes` says otherwise: 16 peers at their own bound (~8 MiB at the default
 * `mcp.maxResultBytes`), 60 of the largest messages on their way at once. A peer that reads what it is sent holds next
 * to nothing (its socket takes each message as fast as the network moves it); 256 tool processes that read nothing
 * held 2 GiB before. Never less than two peers' own bounds (a larger `maxResultBytes`): the largest message fits.
 */
export function unreadBudget(configured: number | undefined, perPeer: number): number {
  return configured ?? Math.max(128 * 1024 * 1024, 2 * perPeer);
}

/** Why a write refused for the total failed (what the caller of the call it carried reads, after the server's name). */
export const UNREAD_FULL =
  "not sent: the gateway holds as much as it may of what its hosted servers and tool processes have not read yet (mcp.unreadBudgetBytes), and this one's tenant or server holds the most of it";

/**
 * The metrics a total moves: its bytes held, their peak, and its writes that did not fit by outcome. The hub's by
 * default (`voxgate_mcp_unread_*`); /mcp's response streams have their own (`voxgate_mcp_endpoint_unread_*`).
 */
export type UnreadMetrics = Pick<Metrics, 'hubUnreadBytes' | 'hubUnreadPeak' | 'hubUnreadFull'>;

/** What a total's warnings say: a write refused (the writer's group holds the most), a peer cut for another's write. */
export interface UnreadLines {
  refused: string;
  cut: string;
}

const HUB_LINES: UnreadLines = {
  refused: 'MCP unread budget full (mcp.unreadBudgetBytes): a message to a server or tool process whose tenant or server holds the most of it refused',
  cut: 'MCP unread budget full (mcp.unreadBudgetBytes): the peer holding the most of the tenant or server holding the most cut, to make room for another',
};

/** Cuts a full total needs to make room for one write: each frees a peer's bytes. */
const MAX_CUTS_PER_WRITE = 64;

/**
 * What every hosted server and tool process together may leave unread of what the gateway writes them. Each peer
 * is bounded on its own (hub/upstream/transports.ts `unreadBound`, ~8 MiB), but 256 tool processes at that bound held
 * 2 GiB: this bound is the gateway's. A write that does not fit is never buffered:
 *
 * - the writer's group holds the most (counting the write): the write is refused (its call fails at once; a tool
 *   process's own requests go unanswered). The peer stays, and writes again once it has read;
 * - another group holds more than the writer's would: that group's peer holding the most is cut (its bytes go with
 *   its connection), the largest group first, until the write fits. A tenant flooding through many sockets never
 *   starves another tenant's process that reads what it is sent: the flood holds the most, and gives way first.
 */
export class UnreadTotal {
  private bytes = 0;
  /** The most held at once since start (`voxgate_mcp_unread_bytes_peak`). */
  peak = 0;
  private readonly groups = new Map<string, Group>();
  private readonly gauge: BoundGauge;
  private readonly peakGauge: BoundGauge;
  private readonly refused: BoundCounter;
  private readonly cuts: BoundCounter;
  /** A line a minute per group and outcome: a flood is refused hundreds of times a second. */
  private readonly lines: ThrottledLog;

  /** The two log lines' messages (`UnreadLines`): the hub's unless the constructor is told others. */
  private readonly says: UnreadLines;

  constructor(
    readonly maxBytes: number,
    o: { log: LevelLog; metrics: UnreadMetrics; lines?: UnreadLines },
  ) {
    this.says = o.lines ?? HUB_LINES;
    this.gauge = bindGauge(o.metrics.hubUnreadBytes, {});
    this.peakGauge = bindGauge(o.metrics.hubUnreadPeak, {});
    this.refused = bindCounter(o.metrics.hubUnreadFull, { outcome: 'refused' });
    this.cuts = bindCounter(o.metrics.hubUnreadFull, { outcome: 'cut' });
    this.lines = new ThrottledLog(o.log, 'warn', { linesPerWindow: 1, windowMs: 60_000, maxKeys: 1024 }, () => performance.now());
  }

  /** Bytes held now, all peers together. */
  get held(): number {
    return this.bytes;
  }

  /** A peer that may be written to: `cut` drops what waits for it (without one, it is never cut, only refused). */
  join(place: { group: string; who: Record<string, unknown> }, cut?: () => void): UnreadShare {
    let group = this.groups.get(place.group);
    if (!group) this.groups.set(place.group, (group = { key: place.group, held: 0, members: new Set() }));
    const m: Member = { held: 0, gone: false, group, who: place.who, cut };
    group.members.add(m);
    return {
      take: (bytes) => this.take(m, bytes),
      give: (bytes) => this.give(m, bytes),
      leave: () => this.leave(m),
    };
  }

  private take(m: Member, bytes: number): boolean {
    if (m.gone) return false;
    if (this.bytes + bytes > this.maxBytes && !this.makeRoom(m, bytes)) {
      this.refused.inc();
      const fields = { ...m.who, bytes, heldByItsGroup: m.group.held, held: this.bytes, maxBytes: this.maxBytes };
      this.lines.write(fields, this.says.refused, `refused:${m.group.key}`);
      return false;
    }
    m.held += bytes;
    m.group.held += bytes;
    this.bytes += bytes;
    this.gauge.set(this.bytes);
    if (this.bytes > this.peak) this.peakGauge.set((this.peak = this.bytes));
    return true;
  }

  private give(m: Member, bytes: number): void {
    if (m.gone) return;
    m.held -= bytes;
    m.group.held -= bytes;
    this.bytes -= bytes;
    this.gauge.set(this.bytes);
  }

  private leave(m: Member): void {
    if (m.gone) return;
    m.gone = true;
    this.bytes -= m.held;
    m.group.held -= m.held;
    m.held = 0;
    m.group.members.delete(m);
    if (m.group.members.size === 0 && this.groups.get(m.group.key) === m.group) this.groups.delete(m.group.key);
    this.gauge.set(this.bytes);
  }

  /** Cut the peers of the groups holding more than the writer's would, the largest first, until `bytes` fit. */
  private makeRoom(writer: Member, bytes: number): boolean {
    const mine = writer.group.held + bytes;
    for (let cuts = 0; this.bytes + bytes > this.maxBytes; cuts++) {
      const victim = cuts < MAX_CUTS_PER_WRITE ? this.largestBeside(writer.group, mine) : undefined;
      if (!victim) return false;
      this.cuts.inc();
      const fields = { cut: victim.who, held: victim.held, heldByItsGroup: victim.group.held, for: writer.who, bytes, maxBytes: this.maxBytes };
      this.lines.write(fields, this.says.cut, `cut:${victim.group.key}`);
      this.leave(victim);
      victim.cut!();
    }
    return true;
  }

  /** Of the groups but `own` holding more than `mine`, the largest one's peer that can be cut holding the most. */
  private largestBeside(own: Group, mine: number): Member | undefined {
    let best: Member | undefined;
    let bestHeld = mine;
    for (const g of this.groups.values()) {
      if (g === own || g.held <= bestHeld) continue;
      const m = largestCuttable(g);
      if (m) [best, bestHeld] = [m, g.held];
    }
    return best;
  }
}

function largestCuttable(g: Group): Member | undefined {
  let best: Member | undefined;
  for (const m of g.members) if (m.cut && m.held > 0 && (!best || m.held > best.held)) best = m;
  return best;
}
