import { useMemo, useState } from 'preact/hooks';
import { api, devicePath } from '../lib/api.js';
import { problemOf } from '../lib/hooks.js';
import { collectArgs, fieldsOf, initialValue, type Field } from '../lib/schema-form.js';
import type { CallResult, Problem } from '../lib/types.js';
import { Badge, Json, ProblemBox, ResultText } from '../components.js';

/** What a card needs of a tool: a device's (GET /v1/devices/{id}/tools) or the hub's (GET /v1/tools). */
export interface CardTool {
  name: string;
  title?: string | undefined;
  description: string;
  inputSchema: Record<string, unknown>;
  annotations?: Record<string, unknown> | undefined;
  userOnly?: boolean | undefined;
}

/** The route a device tool is called on. */
export const deviceToolPath = (deviceId: string, tool: string) => `${devicePath(deviceId)}/tools/${encodeURIComponent(tool)}/call`;
/** The route a hub tool (a hosted server's, an MCP endpoint's) is called on: POST /v1/tools/{name}/call. */
export const hubToolPath = (tool: string) => `/v1/tools/${encodeURIComponent(tool)}/call`;

/** A tool that says it may destroy something (MCP annotations: destructiveHint true) runs only after a second, explicit click. */
export const isDestructive = (tool: CardTool) => tool.annotations?.['destructiveHint'] === true && tool.annotations['readOnlyHint'] !== true;

/** One tool: its description, a form generated from its inputSchema, and the last call's outcome. */
export function ToolCard({ tool, callPath }: { tool: CardTool; callPath: string }) {
  const fields = useMemo(() => fieldsOf(tool.inputSchema), [tool.inputSchema]);
  const [values, setValues] = useState<Record<string, string | boolean>>(() => Object.fromEntries(fields.map((f) => [f.name, initialValue(f)])));
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<{ result: CallResult } | { problem: Problem } | { invalid: string }>();
  // A destructive tool's arguments wait here for "Run it".
  const [confirming, setConfirming] = useState<Record<string, unknown>>();
  const idBase = `t-${tool.name.replace(/[^A-Za-z0-9_-]/g, '_')}`;
  const destructive = isDestructive(tool);

  const run = async (args: Record<string, unknown>) => {
    setConfirming(undefined);
    setBusy(true);
    setOutcome(undefined);
    try {
      setOutcome({ result: await api<CallResult>('POST', callPath, { arguments: args }) });
    } catch (err) {
      setOutcome({ problem: problemOf(err) });
    } finally {
      setBusy(false);
    }
  };
  const call = (e: Event) => {
    e.preventDefault();
    const collected = collectArgs(fields, values);
    if (!collected.ok) return setOutcome({ invalid: collected.message });
    if (destructive) return (setOutcome(undefined), setConfirming(collected.args));
    void run(collected.args);
  };

  return (
    <article class="tool" data-tool={tool.name} aria-labelledby={`${idBase}-h`}>
      <h3 id={`${idBase}-h`}>
        <code>{tool.name}</code> {tool.userOnly && <Badge tone="info">user-only</Badge>}
        {destructive && <Badge tone="bad">destructive</Badge>}
      </h3>
      {tool.title && <p class="small">{tool.title}</p>}
      {tool.description && <p class="desc">{tool.description}</p>}
      {tool.userOnly && <p class="muted small">Marked for people (audience: user): an LLM is not offered this tool.</p>}
      <form onSubmit={call}>
        {fields.map((f) => (
          <FieldInput
            key={f.name}
            id={`${idBase}-${f.name}`}
            field={f}
            value={values[f.name] ?? ''}
            onChange={(v) => setValues((s) => ({ ...s, [f.name]: v }))}
          />
        ))}
        {fields.length === 0 && <p class="muted small">No arguments.</p>}
        <button type="submit" disabled={busy || confirming !== undefined}>
          {busy ? 'Calling…' : `Call ${tool.name}`}
        </button>
      </form>
      {confirming && (
        <div class="confirm-run" role="alertdialog" aria-labelledby={`${idBase}-confirm`}>
          <p id={`${idBase}-confirm`}>
            <strong>{tool.name}</strong> is marked destructive (it may change or delete something for good). Run it with{' '}
            <code>{JSON.stringify(confirming).slice(0, 300)}</code>?
          </p>
          <div class="actions">
            <button type="button" class="danger" onClick={() => void run(confirming)}>
              Run {tool.name}
            </button>
            <button type="button" class="secondary" onClick={() => setConfirming(undefined)}>
              Don't run
            </button>
          </div>
        </div>
      )}
      <div aria-live="polite" class="outcome">
        {outcome && 'invalid' in outcome && <p class="invalid">{outcome.invalid}</p>}
        {outcome && 'problem' in outcome && <ProblemBox problem={outcome.problem} label="Call failed" />}
        {outcome && 'result' in outcome && <ResultView result={outcome.result} />}
      </div>
    </article>
  );
}

function FieldInput({ id, field: f, value, onChange }: { id: string; field: Field; value: string | boolean; onChange: (v: string | boolean) => void }) {
  const hint = [
    f.kind === 'json' ? 'JSON' : f.kind,
    f.minimum !== undefined ? `≥ ${f.minimum}` : '',
    f.maximum !== undefined ? `≤ ${f.maximum}` : '',
    f.maxLength !== undefined ? `at most ${f.maxLength} characters` : '',
    f.default !== undefined ? `default ${JSON.stringify(f.default)}` : '',
  ]
    .filter(Boolean)
    .join(', ');
  const describedBy = `${id}-hint`;
  const label = (
    <label for={id}>
      {f.name}
      {f.required && (
        <span class="req" aria-hidden="true">
          {' '}
          *
        </span>
      )}
      {f.required && <span class="sr-only"> (required)</span>}
    </label>
  );
  const help = (
    <p id={describedBy} class="muted small">
      {f.description ? `${f.description} · ` : ''}
      {hint}
    </p>
  );
  if (f.kind === 'boolean')
    return (
      <div class="field check">
        <input id={id} type="checkbox" checked={value === true} onChange={(e) => onChange(e.currentTarget.checked)} aria-describedby={describedBy} />
        {label}
        {help}
      </div>
    );
  if (f.kind === 'enum')
    return (
      <div class="field">
        {label}
        <select id={id} value={String(value)} required={f.required} onChange={(e) => onChange(e.currentTarget.value)} aria-describedby={describedBy}>
          {!f.required && <option value="">(none)</option>}
          {f.required && value === '' && <option value="">choose…</option>}
          {(f.options ?? []).map((o) => (
            <option value={JSON.stringify(o)}>{String(o)}</option>
          ))}
        </select>
        {help}
      </div>
    );
  if (f.kind === 'json')
    return (
      <div class="field">
        {label}
        <textarea
          id={id}
          rows={3}
          value={String(value)}
          required={f.required}
          onInput={(e) => onChange(e.currentTarget.value)}
          aria-describedby={describedBy}
          spellcheck={false}
        />
        {help}
      </div>
    );
  const numeric = f.kind === 'number' || f.kind === 'integer';
  return (
    <div class="field">
      {label}
      <input
        id={id}
        type={numeric ? 'number' : 'text'}
        inputMode={f.kind === 'integer' ? 'numeric' : numeric ? 'decimal' : undefined}
        step={f.kind === 'integer' ? 1 : numeric ? 'any' : undefined}
        min={f.minimum}
        max={f.maximum}
        minLength={f.minLength}
        maxLength={f.maxLength}
        required={f.required}
        value={String(value)}
        onInput={(e) => onChange(e.currentTarget.value)}
        aria-describedby={describedBy}
      />
      {help}
    </div>
  );
}

export function ResultView({ result }: { result: CallResult }) {
  return (
    <div class={`result ${result.isError ? 'is-error' : ''}`} data-testid="call-result">
      <p>
        {result.isError ? <Badge tone="bad">tool error</Badge> : <Badge tone="ok">ok</Badge>} in{' '}
        <span class="duration">{Math.round(result.durationMs)} ms</span>
      </p>
      {result.content.map((c) =>
        c['type'] === 'text' && typeof c['text'] === 'string' ? (
          <ResultText text={c['text']} />
        ) : c['type'] === 'image' &&
          typeof c['data'] === 'string' &&
          typeof c['mimeType'] === 'string' &&
          /^image\/(png|jpeg|gif|webp)$/.test(c['mimeType']) ? (
          <img alt="image from the tool" src={`data:${c['mimeType']};base64,${c['data']}`} />
        ) : (
          <Json value={c} />
        ),
      )}
      {result.structuredContent && (
        <details>
          <summary>structuredContent</summary>
          <Json value={result.structuredContent} />
        </details>
      )}
    </div>
  );
}
