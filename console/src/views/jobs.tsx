import { useState } from 'preact/hooks';
import { api } from '../lib/api.js';
import { isMissingRoute, useCapabilities } from '../lib/capabilities.js';
import { EMPTY_JOB_FORM, jobBody, jobProgress, type JobForm } from '../lib/fleet.js';
import { CALL_STATES, type CallState, type Job, type JobDeviceList, type JobList } from '../lib/fleet-types.js';
import { type Invalid, problemOf, useAction, useCoalesced, useLoad, useOnEvent } from '../lib/hooks.js';
import type { Problem } from '../lib/types.js';
import { Ago, Badge, Json, Loading, NotAvailable, ProblemBox, Pager } from '../components.js';
import { JobFields, filterText } from './job-form.js';
import { ResultView } from './tool-form.js';

const jobTone = (s: Job['state']) => (s === 'succeeded' ? 'ok' : s === 'running' ? 'info' : s === 'cancelled' ? 'off' : 'bad');
const callTone = (s: CallState) => (s === 'succeeded' ? 'ok' : s === 'failed' || s === 'expired' ? 'bad' : s === 'cancelled' ? 'off' : 'info');

/** A failing load whose route this gateway lacks is "not available"; any other problem is shown. */
async function guarded<T>(load: () => Promise<T>): Promise<T | null> {
  try {
    return await load();
  } catch (e) {
    if (isMissingRoute(e)) return null;
    throw e;
  }
}

/** Fleet jobs (FLEET-API.md): one tool on every device a filter selects, with rollout controls, progress and results. */
export function JobsView({ id }: { id?: string }) {
  const caps = useCapabilities();
  if (caps && !caps.has('get', '/v1/jobs'))
    return (
      <section aria-labelledby="jobs-h">
        <h1 id="jobs-h">Jobs</h1>
        <NotAvailable what="Fleet jobs" />
      </section>
    );
  return id ? <JobDetail id={id} /> : <JobsList />;
}

function JobsList() {
  const list = useLoad((signal) => guarded(() => api<JobList>('GET', '/v1/jobs', undefined, { signal })), []);
  const reload = useCoalesced(list.reload, 500);
  useOnEvent((e) => (e === 'resync' || e.type === 'job.progress') && reload());
  return (
    <section aria-labelledby="jobs-h">
      <h1 id="jobs-h">Jobs</h1>
      {list.data === null ? (
        <NotAvailable what="Fleet jobs" />
      ) : (
        <>
          <NewJob />
          {list.problem && <ProblemBox problem={list.problem} label="Could not list jobs" />}
          {!list.data && list.loading && <Loading what="jobs" />}
          {list.data && list.data.jobs.length === 0 && <p class="muted">No job yet.</p>}
          {list.data && list.data.jobs.length > 0 && (
            <div class="table-wrap">
              <table class="jobs">
                <thead>
                  <tr>
                    <th scope="col">Job</th>
                    <th scope="col">State</th>
                    <th scope="col">Devices</th>
                    <th scope="col">Progress</th>
                    <th scope="col">Started</th>
                  </tr>
                </thead>
                <tbody>
                  {list.data.jobs.map((j) => (
                    <tr key={j.id} data-job={j.id}>
                      <th scope="row">
                        <a href={`#/jobs/${encodeURIComponent(j.id)}`}>
                          <code>{j.tool}</code>
                        </a>
                        <div class="muted small">{j.id}</div>
                      </th>
                      <td>
                        <Badge tone={jobTone(j.state)}>{j.state}</Badge>
                      </td>
                      <td>{filterText(j.filter)}</td>
                      <td>
                        <Progress job={j} />
                      </td>
                      <td>
                        <Ago iso={j.createdAt} />
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
        </>
      )}
    </section>
  );
}

function NewJob() {
  const [form, setForm] = useState<JobForm>(EMPTY_JOB_FORM);
  const { busy, problem, setProblem, run } = useAction<Invalid>();
  const submit = async (e: Event) => {
    e.preventDefault();
    const body = jobBody(form);
    if (!body.ok) return setProblem({ invalid: body.message });
    await run(async () => {
      const job = await api<Job>('POST', '/v1/jobs', body.value);
      location.hash = `#/jobs/${encodeURIComponent(job.id)}`;
    });
  };
  return (
    <details class="card">
      <summary>
        <h2>New job</h2>
      </summary>
      <form onSubmit={submit} class="job-form">
        <JobFields form={form} set={setForm} idBase="job" />
        <button type="submit" disabled={busy}>
          Start job
        </button>
        {problem && ('invalid' in problem ? <p class="invalid">{problem.invalid}</p> : <ProblemBox problem={problem} label="Not started" />)}
      </form>
    </details>
  );
}

function Progress({ job }: { job: Job }) {
  const { done, percent } = jobProgress(job.counts, job.total);
  const c = job.counts;
  return (
    <div class="progress-cell">
      <progress max={100} value={percent} aria-label={`${done} of ${job.total} finished`} />
      <div class="small counts-line">
        {done}/{job.total} · <span class="ok">{c.succeeded} ok</span> · {c.failed} failed · {c.expired} expired · {c.queued + c.sent} waiting
        {c.cancelled > 0 && ` · ${c.cancelled} cancelled`}
      </div>
    </div>
  );
}

function JobDetail({ id }: { id: string }) {
  const job = useLoad((signal) => guarded(() => api<Job>('GET', `/v1/jobs/${encodeURIComponent(id)}`, undefined, { signal })), [id]);
  const [state, setState] = useState<CallState | ''>('');
  const [cursors, setCursors] = useState<string[]>([]);
  const cursor = cursors[cursors.length - 1];
  const devices = useLoad(
    (signal) => {
      const q = new URLSearchParams();
      if (state) q.set('state', state);
      if (cursor) q.set('cursor', cursor);
      return guarded(() => api<JobDeviceList>('GET', `/v1/jobs/${encodeURIComponent(id)}/devices?${q}`, undefined, { signal }));
    },
    [id, state, cursor],
  );
  const reload = useCoalesced(() => (job.reload(), devices.reload()), 500);
  useOnEvent((e) => (e === 'resync' || (e.type === 'job.progress' && e.data['jobId'] === id)) && reload());
  const [problem, setProblem] = useState<Problem>();
  const cancel = async () => {
    try {
      await api<Job>('POST', `/v1/jobs/${encodeURIComponent(id)}/cancel`);
      job.reload();
    } catch (err) {
      setProblem(problemOf(err));
    }
  };
  const j = job.data;
  return (
    <section aria-labelledby="job-h">
      <p>
        <a href="#/jobs">← Jobs</a>
      </p>
      <h1 id="job-h">
        Job <code>{id}</code>
      </h1>
      {job.data === null && <NotAvailable what="Fleet jobs" />}
      {job.problem && <ProblemBox problem={job.problem} />}
      {j === undefined && job.loading && <Loading what="the job" />}
      {j && (
        <>
          <dl class="facts">
            <dt>State</dt>
            <dd>
              <Badge tone={jobTone(j.state)}>{j.state}</Badge>
            </dd>
            <dt>Tool</dt>
            <dd>
              <code>{j.tool}</code>
            </dd>
            <dt>Arguments</dt>
            <dd>
              <code>{JSON.stringify(j.arguments ?? {})}</code>
            </dd>
            <dt>Devices</dt>
            <dd>{filterText(j.filter)}</dd>
            <dt>Rollout</dt>
            <dd>
              {j.concurrency} at a time{j.ratePerSecond ? `, ${j.ratePerSecond}/s` : ''}
              {j.abortOverPercent ? `, aborts over ${j.abortOverPercent}% failed` : ''}, each call lives {Math.round(j.ttlMs / 1000)} s
            </dd>
            <dt>Started</dt>
            <dd>
              <Ago iso={j.createdAt} />
            </dd>
            <dt>Progress</dt>
            <dd>
              <Progress job={j} />
            </dd>
          </dl>
          {j.state === 'running' && (
            <button type="button" class="danger" onClick={() => void cancel()}>
              Cancel job
            </button>
          )}
          {problem && <ProblemBox problem={problem} label="Not cancelled" />}
          <h2>Devices</h2>
          <div class="filters">
            <label>
              State
              <select value={state} onChange={(e) => (setState(e.currentTarget.value as CallState | ''), setCursors([]))}>
                <option value="">all</option>
                {CALL_STATES.map((s) => (
                  <option key={s} value={s}>
                    {s}
                  </option>
                ))}
              </select>
            </label>
          </div>
          {devices.problem && <ProblemBox problem={devices.problem} />}
          {devices.data && devices.data.devices.length === 0 && <p class="muted">No device {state ? `in state ${state}` : 'yet'}.</p>}
          <ul class="calls">
            {devices.data?.devices.map((d) => (
              <li key={d.callId} data-device={d.deviceId} data-state={d.state}>
                <Badge tone={callTone(d.state)}>{d.state}</Badge> <a href={`#/devices/${encodeURIComponent(d.deviceId)}`}>{d.deviceId}</a>
                {d.result && <ResultView result={d.result} />}
                {d.error && (
                  <p class="invalid">
                    <code>{d.error.code}</code> {d.error.message}
                  </p>
                )}
              </li>
            ))}
          </ul>
          <Pager cursors={cursors} next={devices.data?.nextCursor} onChange={setCursors} />
          <details>
            <summary>raw</summary>
            <Json value={j} />
          </details>
        </>
      )}
    </section>
  );
}
