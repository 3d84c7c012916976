import { useState } from 'preact/hooks';
import { api } from '../lib/api.js';
import { isMissingRoute } from '../lib/capabilities.js';
import { type Invalid, problemOf, useAction, useInterval, useLoad } from '../lib/hooks.js';
import type { McpEndpoint, McpEndpointCreated, Problem } from '../lib/types.js';
import { Ago, Badge, Loading, NotAvailable, ProblemBox } from '../components.js';

/** A tool process connects or leaves without an event: the list is looked up again this often while the page is open. */
const REFRESH_MS = 5000;
const NAME = /^[A-Za-z0-9_-]{1,32}$/;

/**
 * MCP endpoints (xiaozhi's MCP接入点): a tool process (mcp_pipe.py and its ports) dials in over WebSocket
 * with a token and serves its tools as mcp__<name>__<tool>. Create a token (shown once, with the URL to
 * give the process), see each endpoint's connection and tools, revoke.
 */
export function EndpointsView() {
  const list = useLoad(async (signal) => {
    try {
      return await api<{ endpoints: McpEndpoint[] }>('GET', '/v1/mcp/endpoints', undefined, { signal });
    } catch (e) {
      if (isMissingRoute(e)) return null;
      throw e;
    }
  }, []);
  useInterval(list.reload, REFRESH_MS);
  const [created, setCreated] = useState<McpEndpointCreated>();
  return (
    <section aria-labelledby="endpoints-h">
      <h1 id="endpoints-h">MCP endpoints</h1>
      <p class="muted">
        A tool process on any machine (xiaozhi's <code>mcp_pipe.py</code> and its ports) connects <em>out</em> to the gateway with a token, and its tools join
        the hub as <code>mcp__&lt;name&gt;__&lt;tool&gt;</code>: for the assistant, <code>/mcp</code> and the API. See docs/mcp-hub.md.
      </p>
      {list.data === null ? (
        <NotAvailable what="The MCP endpoint" />
      ) : (
        <>
          <CreateEndpoint onCreated={(c) => (setCreated(c), list.reload())} />
          {created && <CreatedToken created={created} onDismiss={() => setCreated(undefined)} />}
          {list.problem && <ProblemBox problem={list.problem} label="Could not list endpoints" />}
          {!list.data && list.loading && <Loading what="endpoints" />}
          {list.data && list.data.endpoints.length === 0 && <p class="muted">No endpoint yet.</p>}
          <div class="servers">
            {list.data?.endpoints.map((e) => (
              <EndpointCard key={e.id} endpoint={e} onRevoked={list.reload} />
            ))}
          </div>
        </>
      )}
    </section>
  );
}

function CreateEndpoint({ onCreated }: { onCreated: (c: McpEndpointCreated) => void }) {
  const [name, setName] = useState('');
  const [tenant, setTenant] = useState('');
  const [allowed, setAllowed] = useState('');
  const { busy, problem, setProblem, run } = useAction<Invalid>();
  const submit = async (e: Event) => {
    e.preventDefault();
    if (!NAME.test(name.trim())) return setProblem({ invalid: 'name: 1-32 letters, digits, _ or -' });
    const allowedTools = allowed.split(/[\s,]+/).filter(Boolean);
    await run(async () => {
      const body = {
        name: name.trim(),
        ...(tenant.trim() ? { tenant: tenant.trim() } : {}),
        ...(allowedTools.length ? { allowed_tools: allowedTools } : {}),
      };
      onCreated(await api<McpEndpointCreated>('POST', '/v1/mcp/endpoints', body));
      setName('');
      setAllowed('');
    });
  };
  return (
    <form class="card endpoint-form" onSubmit={submit}>
      <h2>New endpoint</h2>
      <div class="field">
        <label for="ep-name">Name</label>
        <input
          id="ep-name"
          value={name}
          maxLength={32}
          required
          placeholder="calculator"
          aria-describedby="ep-name-help"
          onInput={(e) => setName(e.currentTarget.value)}
        />
        <p id="ep-name-help" class="muted small">
          Its tools are named <code>mcp__{name || '<name>'}__&lt;tool&gt;</code>.
        </p>
      </div>
      <div class="field">
        <label for="ep-tenant">Tenant (optional)</label>
        <input id="ep-tenant" value={tenant} maxLength={64} onInput={(e) => setTenant(e.currentTarget.value)} />
      </div>
      <div class="field">
        <label for="ep-allowed">Allowed tools (optional; comma separated, empty: all)</label>
        <input id="ep-allowed" value={allowed} onInput={(e) => setAllowed(e.currentTarget.value)} />
      </div>
      <button type="submit" disabled={busy}>
        Create token
      </button>
      {problem && ('invalid' in problem ? <p class="invalid">{problem.invalid}</p> : <ProblemBox problem={problem} label="Not created" />)}
    </form>
  );
}

/** The one time the token is seen: the URL to set as the tool process's MCP_ENDPOINT, with a copy button. */
function CreatedToken({ created, onDismiss }: { created: McpEndpointCreated; onDismiss: () => void }) {
  const [copied, setCopied] = useState<'yes' | 'no'>();
  const copy = async () => {
    try {
      // Refused outside a secure context (plain http on the LAN): then the URL is selected on click instead.
      await navigator.clipboard.writeText(created.url);
      setCopied('yes');
    } catch {
      setCopied('no');
    }
  };
  return (
    <div class="card created-token" role="status" data-endpoint={created.name}>
      <h2>Endpoint “{created.name}” created</h2>
      <p>
        Give the tool process this URL. <strong>It holds the token and is shown only now</strong>: the gateway keeps only its hash.
      </p>
      <pre class="endpoint-url">{created.url}</pre>
      {copied === 'no' && <p class="invalid">This browser refused the clipboard here: select the URL above and copy it.</p>}
      <pre class="muted small">{`export MCP_ENDPOINT='${created.url}'\npython mcp_pipe.py calculator.py`}</pre>
      <div class="actions">
        <button type="button" onClick={() => void copy()}>
          {copied === 'yes' ? 'Copied' : 'Copy URL'}
        </button>
        <button type="button" class="secondary" onClick={onDismiss}>
          Done
        </button>
      </div>
    </div>
  );
}

function EndpointCard({ endpoint: e, onRevoked }: { endpoint: McpEndpoint; onRevoked: () => void }) {
  const [confirming, setConfirming] = useState(false);
  const [problem, setProblem] = useState<Problem>();
  const revoke = async () => {
    try {
      await api('DELETE', `/v1/mcp/endpoints/${encodeURIComponent(e.id)}`);
      onRevoked();
    } catch (err) {
      setProblem(problemOf(err));
    }
  };
  return (
    <article class="card server" data-endpoint-id={e.id} data-endpoint={e.name}>
      <h2>
        {e.name} <Badge tone={e.state === 'connected' ? 'ok' : 'off'}>{e.state === 'connected' ? 'connected' : 'waiting for its tool process'}</Badge>
      </h2>
      <p class="muted small">
        created <Ago iso={e.createdAt} />
        {e.tenant && ` · tenant ${e.tenant}`}
        {e.allowedTools && ` · allowed: ${e.allowedTools.join(', ')}`}
      </p>
      {/* While waiting, the "error" is only that nobody has dialed in yet. */}
      {e.lastError && (
        <p class={e.state === 'connected' ? 'problem' : 'muted small'} role="note">
          Last error: {e.lastError}
        </p>
      )}
      <details>
        <summary>{e.toolCount} tools</summary>
        <ul class="names">
          {e.tools.map((t) => (
            <li key={t}>
              <code>{t}</code>
            </li>
          ))}
        </ul>
        {e.toolCount > 0 && (
          <p class="small">
            Call them on the <a href="#/servers">Servers</a> page.
          </p>
        )}
      </details>
      {confirming ? (
        <div class="actions" role="group" aria-label={`Revoke ${e.name}?`}>
          <span>Revoke? A connected process is cut off.</span>
          <button type="button" class="danger" onClick={() => void revoke()}>
            Revoke {e.name}
          </button>
          <button type="button" class="secondary" onClick={() => setConfirming(false)}>
            Keep
          </button>
        </div>
      ) : (
        <button type="button" class="secondary" onClick={() => setConfirming(true)}>
          Revoke…
        </button>
      )}
      {problem && <ProblemBox problem={problem} label="Not revoked" />}
    </article>
  );
}
