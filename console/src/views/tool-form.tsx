import { useMemo, useState } from 'preact/hooks';
import { api, devicePath } from '../lib/api.js';
import { problemOf } from '../lib/hooks.js';
import { collectArgs, fieldsOf, initialValue, type Field } from '../lib/schema-form.js';
import type { CallResult, Problem, Tool } from '../lib/types.js';
import { Badge, Json, ProblemBox } from '../components.js';

/** One tool: its description, a form generated from its inputSchema, and the last call's outcome. */
export function ToolCard({ deviceId, tool }: { deviceId: string; tool: Tool }) {
  const fields = useMemo(() => fieldsOf(tool.inputSchema), [tool.inputSchema]);
  const [values, setValues] = useState<Record<string, string | boolean>>(() => Object.fromEntries(fields.map((f) => [f.name, initialValue(f)])));
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<{ result: CallResult } | { problem: Problem } | { invalid: string }>();
  const idBase = `t-${tool.name.replace(/[^A-Za-z0-9_-]/g, '_')}`;

  const call = async (e: Event) => {
    e.preventDefault();
    const collected = collectArgs(fields, values);
    if (!collected.ok) return setOutcome({ invalid: collected.message });
    setBusy(true);
    setOutcome(undefined);
    try {
      const result = await api<CallResult>('POST', `${devicePath(deviceId)}/tools/${encodeURIComponent(tool.name)}/call`, { arguments: collected.args });
      setOutcome({ result });
    } catch (err) {
      setOutcome({ problem: problemOf(err) });
    } finally {
      setBusy(false);
    }
  };

  return (
    <article class="tool" data-tool={tool.name} aria-labelledby={`${idBase}-h`}>
      <h3 id={`${idBase}-h`}>
        <code>{tool.name}</code> {tool.userOnly && <Badge tone="info">user-only</Badge>}
      </h3>
      {tool.description && <p class="desc">{tool.description}</p>}
      {tool.userOnly && <p class="muted small">Marked for people (audience: user): an LLM is not offered this tool.</p>}
      <form onSubmit={call}>
        {fields.map((f) => (
          <FieldInput key={f.name} id={`${idBase}-${f.name}`} field={f} value={values[f.name] ?? ''} onChange={(v) => setValues((s) => ({ ...s, [f.name]: v }))} />
        ))}
        {fields.length === 0 && <p class="muted small">No arguments.</p>}
        <button type="submit" disabled={busy}>
          {busy ? 'Calling…' : `Call ${tool.name}`}
        </button>
      </form>
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
        <textarea id={id} rows={3} value={String(value)} required={f.required} onInput={(e) => onChange(e.currentTarget.value)} aria-describedby={describedBy} spellcheck={false} />
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

function ResultView({ result }: { result: CallResult }) {
  return (
    <div class={`result ${result.isError ? 'is-error' : ''}`} data-testid="call-result">
      <p>
        {result.isError ? <Badge tone="bad">tool error</Badge> : <Badge tone="ok">ok</Badge>} in <span class="duration">{Math.round(result.durationMs)} ms</span>
      </p>
      {result.content.map((c) =>
        c['type'] === 'text' && typeof c['text'] === 'string' ? (
          <pre class="text">{c['text']}</pre>
        ) : c['type'] === 'image' && typeof c['data'] === 'string' && typeof c['mimeType'] === 'string' && /^image\/(png|jpeg|gif|webp)$/.test(c['mimeType']) ? (
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
