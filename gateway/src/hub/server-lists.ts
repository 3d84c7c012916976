import type { CompleteRequest, CompleteResult, GetPromptResult, ReadResourceResult } from '@modelcontextprotocol/client';
import type { Logger } from 'pino';
import { GatewayError } from '../errors.js';
import { buildNamespace, serverKey, serverToolRaw, shownServerName } from './names.js';
import { targetKey, visibleTo } from './namespace.js';
import type { Caller, HubPrompt, HubResource, HubResourceTemplate } from './types.js';
import type { CallContext, Upstream } from './upstream/base.js';

/**
 * Resources, resource templates and prompts of every server a caller may see, and the requests routed to
 * the server that owns one (read, get, complete, subscribe). Servers are named as the caller knows them: a
 * tenant's own by their names, not their keys in the hub (names.ts serverKey); names are unique in any caller's view.
 */
export class ServerLists {
  /** Upstream resource subscriptions, counted over /mcp sessions: `server\0uri` -> sessions. */
  private readonly subscribed = new Map<string, number>();

  constructor(
    private readonly upstreams: ReadonlyMap<string, Upstream>,
    private readonly log: Logger,
  ) {}

  /**
   * Ask every server the caller may see, at once. A server that fails is left out of this answer and
   * logged; the server itself records the failure (its state and lastError in /v1/mcp/servers).
   */
  private async fromEvery<T>(caller: Caller, what: string, ask: (u: Upstream) => Promise<T[]>): Promise<Array<{ u: Upstream; item: T }>> {
    const lists = await Promise.all(
      [...this.upstreams.values()]
        .filter((u) => visibleTo(u, caller))
        .map(async (u) => {
          try {
            return (await ask(u)).map((item) => ({ u, item }));
          } catch (e) {
            this.log.warn({ server: u.config.name, err: (e as Error).message }, `${what} failed`);
            return [];
          }
        }),
    );
    return lists.flat();
  }

  /** Resources of every visible server that has them. */
  async resources(caller: Caller & CallContext): Promise<HubResource[]> {
    const all = await this.fromEvery(caller, 'resources/list', (u) => u.listResources(caller));
    return all.map(({ u, item }) => ({ ...item, server: shownServerName(u.config.name) })).sort((a, b) => (a.server + a.uri < b.server + b.uri ? -1 : 1));
  }

  /** Resource templates of every visible server that has them. */
  async resourceTemplates(caller: Caller & CallContext): Promise<HubResourceTemplate[]> {
    const all = await this.fromEvery(caller, 'resources/templates/list', (u) => u.listResourceTemplates(caller));
    return all
      .map(({ u, item }) => ({ ...item, server: shownServerName(u.config.name) }))
      .sort((a, b) => (a.server + a.uriTemplate < b.server + b.uriTemplate ? -1 : 1));
  }

  /**
   * Prompts of every visible server, named in the namespace as tools are (mcp__server__prompt). A name a server lists
   * twice keeps its first definition, as its tools do (upstream/base.ts).
   */
  async prompts(caller: Caller & CallContext): Promise<HubPrompt[]> {
    const listed = await this.fromEvery(caller, 'prompts/list', (u) => u.listPrompts(caller));
    const flat: Array<{ server: string; p: (typeof listed)[number]['item'] }> = [];
    const seen = new Set<string>();
    for (const { u, item } of listed) {
      const key = `${u.config.name}\0${item.name}`;
      if (seen.has(key)) continue;
      seen.add(key);
      flat.push({ server: shownServerName(u.config.name), p: item });
    }
    const ns = buildNamespace(flat.map(({ server, p }) => ({ raw: serverToolRaw(server, p.name), target: { kind: 'server', server, tool: p.name } })));
    const byTarget = new Map([...ns].map(([name, t]) => [targetKey(t), name]));
    return flat.map(({ server, p }) => ({ ...p, name: byTarget.get(targetKey({ kind: 'server', server, tool: p.name }))!, server, prompt: p.name }));
  }

  async readResource(uri: string, server: string | undefined, caller: Caller & CallContext): Promise<ReadResourceResult & { server: string }> {
    let u = server ? this.named(server, caller) : undefined;
    if (server && !u) throw new GatewayError('SERVER_NOT_FOUND', `no MCP server "${server}"`);
    u ??= await this.ownerOf(uri, caller);
    return { ...(await u.readResource(uri, caller)), server: shownServerName(u.config.name) };
  }

  /** The server this caller knows by `name`: its tenant's own first, else one by that key it may see. */
  private named(name: string, caller: Caller): Upstream | undefined {
    for (const key of [serverKey(caller.tenant, name), name]) {
      const u = this.upstreams.get(key);
      if (u && visibleTo(u, caller)) return u;
    }
    return undefined;
  }

  async getPrompt(name: string, args: Record<string, string>, caller: Caller & CallContext): Promise<GetPromptResult & { server: string }> {
    const p = (await this.prompts(caller)).find((x) => x.name === name);
    if (!p) throw new GatewayError('NOT_FOUND', `no prompt named "${name.slice(0, 100)}"`);
    return { ...(await this.named(p.server, caller)!.getPrompt(p.prompt, args, caller)), server: p.server };
  }

  /**
   * The server that owns a resource URI: one that lists it, else the one whose template's literal prefix
   * (the text before its first `{`) is the longest start of the URI. Templates are upstream data: matched
   * by prefix, never compiled into a regular expression.
   */
  private async ownerOf(uri: string, caller: Caller & CallContext): Promise<Upstream> {
    const listed = (await this.resources(caller)).find((r) => r.uri === uri);
    if (listed) return this.named(listed.server, caller)!;
    let best: { server: string; len: number } | undefined;
    for (const t of await this.resourceTemplates(caller)) {
      const prefix = t.uriTemplate.split('{')[0]!;
      if (prefix.length > 0 && uri.startsWith(prefix) && (!best || prefix.length > best.len)) best = { server: t.server, len: prefix.length };
    }
    if (!best) throw new GatewayError('NOT_FOUND', `no server lists the resource ${uri.slice(0, 200)} or a template for it; name the server`);
    return this.named(best.server, caller)!;
  }

  /** `completion/complete` for a namespaced prompt or a resource template, passed to its server. */
  async complete(params: CompleteRequest['params'], caller: Caller & CallContext): Promise<CompleteResult> {
    const ref = params.ref;
    if (ref.type === 'ref/prompt') {
      const p = (await this.prompts(caller)).find((x) => x.name === ref.name);
      if (!p) throw new GatewayError('NOT_FOUND', `no prompt named "${ref.name.slice(0, 100)}"`);
      return this.named(p.server, caller)!.complete({ ...params, ref: { ...ref, name: p.prompt } }, caller);
    }
    const t = (await this.resourceTemplates(caller)).find((x) => x.uriTemplate === ref.uri);
    const u = t ? this.named(t.server, caller)! : await this.ownerOf(ref.uri, caller);
    return u.complete(params, caller);
  }

  /** Subscribe (for one more /mcp session) to a resource; returns the owning server's name. */
  async subscribe(uri: string, caller: Caller & CallContext): Promise<string> {
    const u = await this.ownerOf(uri, caller);
    const key = `${u.config.name}\0${uri}`;
    // Counted before the await, so two sessions subscribing at once both hold their count.
    const n = this.subscribed.get(key) ?? 0;
    this.subscribed.set(key, n + 1);
    if (n === 0)
      try {
        await u.subscribe(uri);
      } catch (e) {
        this.subscribed.delete(key);
        throw e;
      }
    return u.config.name;
  }

  /** Whether some /mcp session holds a subscription to the server's resource. */
  isSubscribed(server: string, uri: string): boolean {
    return this.subscribed.has(`${server}\0${uri}`);
  }

  async unsubscribe(server: string, uri: string): Promise<void> {
    const key = `${server}\0${uri}`;
    const n = this.subscribed.get(key) ?? 0;
    if (n > 1) return void this.subscribed.set(key, n - 1);
    this.subscribed.delete(key);
    if (n === 1) await this.upstreams.get(server)?.unsubscribe(uri);
  }
}
