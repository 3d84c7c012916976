import { randomUUID } from 'node:crypto';

/** What a conversation keeps: the user's messages and the final answers (never the tool steps). */
export interface StoredMessage {
  role: 'user' | 'assistant';
  content: string;
  at: string;
}

export interface Conversation {
  id: string;
  /** Who started it (principal.ts ownerOf): only they find it. */
  owner: string | undefined;
  messages: StoredMessage[];
  bytes: number;
  createdAt: number;
  updatedAt: number;
  /** A turn is running on it: a second one at the same time would interleave the history. */
  busy: boolean;
}

export interface ConversationLimits {
  ttlMs: number;
  maxConversations: number;
  maxTurns: number;
  maxBytes: number;
  /** All conversations' bytes together: past it, the least recently used of the tenant holding the most bytes goes. */
  maxTotalBytes: number;
}

/** The tenant part of an owner (principal.ts ownerOf: `<tenant>\u0000<principal>`); '' for keys and devices without one. */
const tenantOf = (owner: string | undefined): string => (owner === undefined ? '' : owner.slice(0, Math.max(0, owner.indexOf('\u0000'))));

/**
 * Conversations in memory: expired after `ttlMs` idle, at most `maxConversations` (the least recently used
 * goes, taken from the tenant holding the most), each cut to its last `maxTurns` exchanges and `maxBytes`, and all
 * of them to `maxTotalBytes` (the least recently used of the tenant holding the most bytes goes). A conversation
 * belongs to its owner (the key that started it, principal.ts): nobody else finds it.
 */
export class ConversationStore {
  // A Map keeps insertion order; touching re-inserts, so the first entry is the least recently used.
  private readonly byId = new Map<string, Conversation>();
  private total = 0;

  constructor(private readonly limits: ConversationLimits) {}

  get(id: string, owner: string | undefined, now = Date.now()): Conversation | undefined {
    const c = this.byId.get(id);
    if (!c || c.owner !== owner) return undefined;
    if (now - c.updatedAt > this.limits.ttlMs && !c.busy) {
      this.drop(c);
      return undefined;
    }
    return c;
  }

  create(owner: string | undefined, now = Date.now()): Conversation {
    this.sweep(now);
    while (this.byId.size >= this.limits.maxConversations) {
      const oldest = this.evictable(tenantOf(owner), () => 1);
      if (!oldest) break;
      this.drop(oldest);
    }
    const c: Conversation = { id: randomUUID(), owner, messages: [], bytes: 0, createdAt: now, updatedAt: now, busy: false };
    this.byId.set(c.id, c);
    return c;
  }

  /**
   * The conversation to forget when the store is full: the least recently used of the tenant holding the most (by
   * `weight`: conversations, or bytes; the creator's own on a tie), not of the whole store. One tenant creating
   * conversations fast (a turn each) otherwise pushed out every other tenant's, and the devices' voice conversations
   * with them. `keep` (the conversation growing) is never taken.
   */
  private evictable(creator: string, weight: (c: Conversation) => number, keep?: Conversation): Conversation | undefined {
    const takable = (c: Conversation) => !c.busy && c !== keep;
    const held = new Map<string, number>();
    for (const c of this.byId.values()) if (takable(c)) held.set(tenantOf(c.owner), (held.get(tenantOf(c.owner)) ?? 0) + weight(c));
    let group = creator;
    for (const [g, n] of held) if (n > (held.get(group) ?? 0)) group = g;
    for (const c of this.byId.values()) if (takable(c) && tenantOf(c.owner) === group) return c;
    return undefined;
  }

  private drop(c: Conversation): void {
    if (this.byId.delete(c.id)) this.total -= c.bytes;
  }

  /** What one conversation may hold: `maxBytes`, and never more than all of them together. */
  private get bound(): number {
    return Math.min(this.limits.maxBytes, this.limits.maxTotalBytes);
  }

  /**
   * Keep one exchange (cut to fit the conversation's bound when it alone is past it), then trim: whole exchanges from
   * the front until within the bounds; then, past `maxTotalBytes`, forget other conversations (the least recently used
   * of the tenant holding the most bytes). True when the exchange was cut: the caller had it whole, the next turn
   * reads the cut one.
   */
  append(c: Conversation, user: string, answer: string, now = Date.now()): boolean {
    const at = new Date(now).toISOString();
    const before = c.bytes;
    const [u, a] = fitExchange(user, answer, this.bound);
    c.messages.push({ role: 'user', content: u, at }, { role: 'assistant', content: a, at });
    c.bytes += Buffer.byteLength(u) + Buffer.byteLength(a);
    while (c.messages.length > 2 && (c.messages.length / 2 > this.limits.maxTurns || c.bytes > this.bound)) {
      const [u, a] = c.messages.splice(0, 2);
      c.bytes -= Buffer.byteLength(u!.content) + Buffer.byteLength(a!.content);
    }
    if (this.byId.has(c.id)) this.total += c.bytes - before;
    while (this.total > this.limits.maxTotalBytes) {
      const oldest = this.evictable(tenantOf(c.owner), (x) => x.bytes, c);
      if (!oldest) break;
      this.drop(oldest);
    }
    this.touch(c, now);
    return u !== user || a !== answer;
  }

  touch(c: Conversation, now = Date.now()): void {
    c.updatedAt = now;
    if (this.byId.has(c.id)) {
      this.byId.delete(c.id);
      this.byId.set(c.id, c);
    }
  }

  delete(id: string, owner: string | undefined): boolean {
    const c = this.get(id, owner);
    if (!c) return false;
    this.drop(c);
    return true;
  }

  /** Drop expired conversations (least recently used first, so stop at the first live one). */
  sweep(now = Date.now()): void {
    for (const c of this.byId.values()) {
      if (now - c.updatedAt <= this.limits.ttlMs) break;
      if (!c.busy) this.drop(c);
    }
  }

  get size(): number {
    return this.byId.size;
  }

  /** The bytes all conversations hold. */
  get bytes(): number {
    return this.total;
  }
}

/**
 * One exchange within `bound` bytes. An answer can be far larger than a conversation may hold (16 characters per
 * maxTokens, a model echoing a long tool result, a long prompt template's message): it was kept whole, so a
 * conversation held one exchange of any size past its bound. Now the message keeps at most half the bound (more
 * when the answer needs less), the answer the rest, each cut one ending with a note the model reads next turn.
 */
function fitExchange(user: string, answer: string, bound: number): [string, string] {
  const a = Buffer.byteLength(answer);
  if (Buffer.byteLength(user) + a <= bound) return [user, answer];
  const u = cutToBytes(user, Math.max(Math.floor(bound / 2), bound - a), 'message');
  return [u, cutToBytes(answer, bound - Buffer.byteLength(u), 'answer')];
}

/** `text` in at most `max` UTF-8 bytes: its start, whole characters only, and a note when there is room for one. */
function cutToBytes(text: string, max: number, what: string): string {
  if (Buffer.byteLength(text) <= max) return text;
  const note = `\n[... cut when stored: the ${what} was ${text.length} characters]`;
  const room = max - Buffer.byteLength(note);
  if (room < 0) return prefixOf(text, max);
  return prefixOf(text, room) + note;
}

/** The longest start of `text` that fits `bytes` UTF-8 bytes (encodeInto never splits a character). */
function prefixOf(text: string, bytes: number): string {
  return text.slice(0, new TextEncoder().encodeInto(text, new Uint8Array(Math.max(0, bytes))).read);
}
