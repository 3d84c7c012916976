import { describe, expect, it } from 'vitest';
import { ConversationStore } from '../../src/assistant/conversations.js';

const limits = { ttlMs: 1000, maxConversations: 3, maxTurns: 2, maxBytes: 1000, maxTotalBytes: 1_000_000 };
const T0 = 1_800_000_000_000;

describe('ConversationStore', () => {
  it('finds a conversation for its owner only', () => {
    const store = new ConversationStore(limits);
    const c = store.create('key-a', T0);
    expect(store.get(c.id, 'key-a', T0)).toBe(c);
    expect(store.get(c.id, 'key-b', T0)).toBeUndefined();
    expect(store.get(c.id, undefined, T0)).toBeUndefined();
    expect(store.delete(c.id, 'key-b')).toBe(false);
    expect(store.delete(c.id, 'key-a')).toBe(true);
    expect(store.size).toBe(0);
  });

  it("when full, forgets the least recently used of the tenant holding the most, not another tenant's (red team 3)", () => {
    // Owners as principal.ts makes them: `<tenant>\u0000<principal>`. One tenant creating conversations fast used to
    // push every other tenant's (and the devices' voice conversations) out of the shared store.
    const store = new ConversationStore({ ...limits, maxConversations: 4 });
    const acme = 'acme\u0000key:a';
    const globex = 'globex\u0000key:b';
    const victim = store.create(globex, T0);
    const device = store.create('globex\u0000device:02:00:00:00:00:01', T0 + 1);
    const mine = Array.from({ length: 6 }, (_, n) => store.create(acme, T0 + 2 + n));
    expect(store.size).toBe(4);
    expect(store.get(victim.id, globex, T0 + 10)).toBe(victim);
    expect(store.get(device.id, 'globex\u0000device:02:00:00:00:00:01', T0 + 10)).toBe(device);
    // acme, holding as many as globex, gives up its own: it keeps its two newest.
    expect(mine.map((c) => store.get(c.id, acme, T0 + 10) !== undefined)).toEqual([false, false, false, false, true, true]);
    // globex's next one costs globex its own least recently used, not acme's.
    const next = store.create(globex, T0 + 20);
    expect(store.get(victim.id, globex, T0 + 20)).toBeUndefined();
    expect([store.get(next.id, globex, T0 + 20), store.get(mine[4]!.id, acme, T0 + 20), store.get(mine[5]!.id, acme, T0 + 20)].every(Boolean)).toBe(true);
  });

  it('expires a conversation idle past its ttl, unless a turn is running on it', () => {
    const store = new ConversationStore(limits);
    const idle = store.create('k', T0);
    const busy = store.create('k', T0);
    busy.busy = true;
    expect(store.get(idle.id, 'k', T0 + 1000)).toBe(idle);
    expect(store.get(idle.id, 'k', T0 + 1001)).toBeUndefined();
    expect(store.get(busy.id, 'k', T0 + 5000)).toBe(busy);
  });

  it('keeps the last maxTurns exchanges, whole, with their byte count', () => {
    const store = new ConversationStore(limits);
    const c = store.create('k', T0);
    for (const n of [1, 2, 3]) store.append(c, `question ${n}`, `answer ${n}`, T0 + n);
    expect(c.messages.map((m) => m.content)).toEqual(['question 2', 'answer 2', 'question 3', 'answer 3']);
    expect(c.bytes).toBe(Buffer.byteLength('question 2answer 2question 3answer 3'));
    expect(c.messages[0]).toMatchObject({ role: 'user', at: new Date(T0 + 2).toISOString() });
  });

  it('trims old exchanges past maxBytes, and keeps the last one, cut to fit when it alone is past them', () => {
    const store = new ConversationStore({ ...limits, maxTurns: 100, maxBytes: 20 });
    const c = store.create('k', T0);
    store.append(c, 'aaaaaaaa', 'bbbbbbbb', T0);
    store.append(c, 'cccccccc', 'dddddddd', T0);
    expect(c.messages.map((m) => m.content)).toEqual(['cccccccc', 'dddddddd']);
    // 101 bytes in a 20-byte conversation: the message keeps what the answer leaves (no room for a note here).
    expect(store.append(c, 'é'.repeat(50), 'x', T0)).toBe(true);
    expect(c.messages.map((m) => m.content)).toEqual(['é'.repeat(9), 'x']);
    expect(c.bytes).toBe(19);
  });

  it('cuts an exchange larger than its conversation to the bound, whole characters, with a note (never stored past it)', () => {
    // One exchange alone used to be kept whole, however large: a conversation of 1 KiB held megabytes.
    const store = new ConversationStore({ ...limits, maxBytes: 1024 });
    const c = store.create('k', T0);
    expect(store.append(c, 'tell me', '😀'.repeat(3000), T0)).toBe(true);
    const [user, answer] = c.messages.map((m) => m.content);
    expect(user).toBe('tell me');
    expect(answer).toMatch(/^(😀)+\n\[\.\.\. cut when stored: the answer was 6000 characters\]$/);
    expect(c.bytes).toBe(Buffer.byteLength(user! + answer!));
    expect(c.bytes).toBeLessThanOrEqual(1024);
    expect(c.bytes).toBeGreaterThan(1024 - 4);
    // A long message and a long answer: each keeps half.
    store.append(c, 'q'.repeat(5000), 'a'.repeat(5000), T0);
    expect(c.messages.map((m) => [m.content.slice(0, 1), Buffer.byteLength(m.content)])).toEqual([
      ['q', 512],
      ['a', 512],
    ]);
    expect(store.bytes).toBe(1024);
    // A message that fits with a short answer is not cut.
    expect(store.append(c, 'q'.repeat(1000), 'ok', T0)).toBe(false);
    expect(store.bytes).toBe(1002);
  });

  it('bounds one conversation by maxTotalBytes too, when that is the smaller', () => {
    const store = new ConversationStore({ ...limits, maxBytes: 1_000_000, maxTotalBytes: 2000 });
    const c = store.create('k', T0);
    store.append(c, 'q', 'x'.repeat(10_000), T0);
    expect([c.bytes, store.bytes, store.size]).toEqual([2000, 2000, 1]);
  });

  it('past maxConversations drops the least recently used idle one; a use makes it recent', () => {
    const store = new ConversationStore(limits);
    const [a, b, c] = [store.create('k', T0), store.create('k', T0 + 1), store.create('k', T0 + 2)];
    store.touch(a, T0 + 3);
    const d = store.create('k', T0 + 4);
    expect(store.size).toBe(3);
    expect(store.get(b.id, 'k', T0 + 4)).toBeUndefined();
    for (const kept of [a, c, d]) expect(store.get(kept.id, 'k', T0 + 4)).toBe(kept);
  });

  it('bounds all conversations together in bytes: the tenant holding the most gives up its least recently used', () => {
    // maxConversations × maxConversationBytes (10 000 × 256 KiB by default) was the only bound on what the store held:
    // one key's conversations, each within its own bounds, could grow the gateway's memory by gigabytes.
    const store = new ConversationStore({ ...limits, maxConversations: 100, maxTurns: 100, maxBytes: 10_000, maxTotalBytes: 1000 });
    const acme = 'acme\u0000key:a';
    const globex = 'globex\u0000key:b';
    const victim = store.create(globex, T0);
    store.append(victim, 'q', 'a'.repeat(199), T0);
    const mine = Array.from({ length: 4 }, (_, n) => {
      const c = store.create(acme, T0 + 1 + n);
      store.append(c, 'q', 'x'.repeat(299), T0 + 1 + n);
      return c;
    });
    expect(store.bytes).toBe(800);
    expect(store.get(victim.id, globex, T0 + 10)).toBe(victim);
    expect(mine.map((c) => store.get(c.id, acme, T0 + 10) !== undefined)).toEqual([false, false, true, true]);
    // What is forgotten, deleted or expired no longer counts.
    expect(store.delete(mine[3]!.id, acme)).toBe(true);
    expect(store.bytes).toBe(500);
    store.sweep(T0 + 5000);
    expect([store.size, store.bytes]).toEqual([0, 0]);
  });

  it('never drops a busy conversation to make room: the store grows instead', () => {
    const store = new ConversationStore({ ...limits, maxConversations: 1 });
    const a = store.create('k', T0);
    a.busy = true;
    const b = store.create('k', T0);
    expect(store.size).toBe(2);
    expect(store.get(a.id, 'k', T0)).toBe(a);
    expect(store.get(b.id, 'k', T0)).toBe(b);
  });
});
