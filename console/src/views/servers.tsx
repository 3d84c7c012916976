import { api } from '../lib/api.js';
import { useLoad } from '../lib/hooks.js';
import type { HostedServer, HubTool, HubToolList } from '../lib/types.js';
import { Ago, Badge, Json, Loading, ProblemBox } from '../components.js';
import { ToolCard, hubToolPath } from './tool-form.js';

/** The hub's tools of one server (a hosted server or an MCP endpoint: both are `source.kind: "server"`). */
const toolsOf = (tools: readonly HubTool[], server: string) => tools.filter((t) => t.source['kind'] === 'server' && t.source['server'] === server);

const tone = (state: string) => (state === 'ready' ? 'ok' : state === 'failed' ? 'bad' : state === 'disabled' || state === 'stopped' ? 'off' : 'warn');

/** The MCP servers the gateway hosts: state, last error, restarts, tools; their resources and prompts. */
export function ServersView() {
  const servers = useLoad((signal) => api<{ enabled: boolean; servers: HostedServer[] }>('GET', '/v1/mcp/servers', undefined, { signal }), []);
  const resources = useLoad((signal) => api<{ resources: Array<Record<string, unknown>> }>('GET', '/v1/mcp/resources', undefined, { signal }), []);
  const prompts = useLoad((signal) => api<{ prompts: Array<Record<string, unknown>> }>('GET', '/v1/mcp/prompts', undefined, { signal }), []);
  const tools = useLoad((signal) => api<HubToolList>('GET', '/v1/tools', undefined, { signal }), []);
  const reload = () => (servers.reload(), resources.reload(), prompts.reload(), tools.reload());
  return (
    <section aria-labelledby="servers-h">
      <h1 id="servers-h">Hosted MCP servers</h1>
      <button type="button" onClick={reload}>
        Refresh
      </button>
      {servers.problem && <ProblemBox problem={servers.problem} />}
      {!servers.data && servers.loading && <Loading what="servers" />}
      {servers.data && !servers.data.enabled && <p>The hub is off on this gateway (no server configured, or MCP_ENABLED=false).</p>}
      {servers.data?.enabled && servers.data.servers.length === 0 && <p>No hosted server.</p>}
      <div class="servers">
        {servers.data?.servers.map((s) => (
          <article class="card server" key={s.name} data-server={s.name}>
            <h2>
              {s.name} <Badge tone={tone(s.state)}>{s.state}</Badge>
            </h2>
            <p class="muted small">
              {s.type}
              {s.serverInfo && ` · ${s.serverInfo.name} ${s.serverInfo.version}`} · since <Ago iso={s.since} /> · restarts {s.restarts}
              {s.pid !== null && ` · pid ${s.pid}`}
            </p>
            {s.lastError && (
              <p class="problem" role="note">
                Last error: {s.lastError}
              </p>
            )}
            <details class="server-tools">
              <summary>{s.toolCount} tools</summary>
              {tools.problem && <ProblemBox problem={tools.problem} label="Tools unavailable" />}
              {/* Callable: POST /v1/tools/{name}/call. Names the hub lists for the server but GET /v1/tools does not (not ready) stay names. */}
              <div class="tools">
                {toolsOf(tools.data?.tools ?? [], s.name).map((t) => (
                  <ToolCard key={t.name} tool={t} callPath={hubToolPath(t.name)} />
                ))}
              </div>
              {!tools.data && (
                <ul class="names">
                  {s.tools.map((t) => (
                    <li key={t}>
                      <code>{t}</code>
                    </li>
                  ))}
                </ul>
              )}
            </details>
          </article>
        ))}
      </div>
      <h2>Resources</h2>
      {resources.problem && <ProblemBox problem={resources.problem} />}
      {resources.data && resources.data.resources.length === 0 && <p class="muted">None.</p>}
      <ul class="names">
        {resources.data?.resources.slice(0, 200).map((r) => (
          <li key={String(r['uri'])}>
            <code>{String(r['uri'] ?? '')}</code> {typeof r['name'] === 'string' && r['name']}{' '}
            {typeof r['description'] === 'string' && <span class="muted small">{r['description']}</span>}
          </li>
        ))}
      </ul>
      <h2>Prompts</h2>
      {prompts.problem && <ProblemBox problem={prompts.problem} />}
      {prompts.data && prompts.data.prompts.length === 0 && <p class="muted">None.</p>}
      <ul class="names">
        {prompts.data?.prompts.slice(0, 200).map((p) => (
          <li key={String(p['name'])}>
            <code>{String(p['name'] ?? '')}</code> {typeof p['description'] === 'string' && <span class="muted small">{p['description']}</span>}
            {Array.isArray(p['arguments']) && p['arguments'].length > 0 && (
              <details>
                <summary>arguments</summary>
                <Json value={p['arguments']} />
              </details>
            )}
          </li>
        ))}
      </ul>
    </section>
  );
}
