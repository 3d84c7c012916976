import { useState } from 'preact/hooks';
import { api } from '../lib/api.js';
import { isMissingRoute, useCapabilities } from '../lib/capabilities.js';
import { EMPTY_JOB_FORM, localTimeZone, scheduleBody, type ScheduleForm } from '../lib/fleet.js';
import type { Schedule, ScheduleList } from '../lib/fleet-types.js';
import { type Invalid, problemOf, useAction, useCoalesced, useLoad, useOnEvent } from '../lib/hooks.js';
import type { Problem } from '../lib/types.js';
import { Ago, Badge, Loading, NotAvailable, ProblemBox } from '../components.js';
import { JobFields, filterText } from './job-form.js';

const EMPTY: ScheduleForm = {
  when: 'cron',
  cron: '',
  timeZone: '',
  at: '',
  target: 'call',
  device: '',
  tool: '',
  arguments: '',
  job: EMPTY_JOB_FORM,
};

/** Schedules (FLEET-API.md): a cron expression in a time zone, or one time, that starts a call or a job. */
export function SchedulesView() {
  const caps = useCapabilities();
  const available = caps?.has('get', '/v1/schedules') ?? true;
  const list = useLoad(
    async (signal) => {
      if (!available) return null;
      try {
        return await api<ScheduleList>('GET', '/v1/schedules', undefined, { signal });
      } catch (e) {
        if (isMissingRoute(e)) return null;
        throw e;
      }
    },
    [available],
  );
  const reload = useCoalesced(list.reload, 500);
  useOnEvent((e) => (e === 'resync' || e.type === 'schedule.fired') && reload());
  return (
    <section aria-labelledby="schedules-h">
      <h1 id="schedules-h">Schedules</h1>
      {list.data === null ? (
        <NotAvailable what="Schedules" />
      ) : (
        <>
          <NewSchedule onCreated={list.reload} />
          {list.problem && <ProblemBox problem={list.problem} label="Could not list schedules" />}
          {!list.data && list.loading && <Loading what="schedules" />}
          {list.data && list.data.schedules.length === 0 && <p class="muted">No schedule yet.</p>}
          <ul class="schedules">
            {list.data?.schedules.map((s) => (
              <ScheduleRow key={s.id} schedule={s} onChanged={list.reload} />
            ))}
          </ul>
        </>
      )}
    </section>
  );
}

function ScheduleRow({ schedule: s, onChanged }: { schedule: Schedule; onChanged: () => void }) {
  const [problem, setProblem] = useState<Problem>();
  const [confirmDelete, setConfirmDelete] = useState(false);
  const act = async (method: 'PATCH' | 'DELETE', body?: unknown) => {
    try {
      await api(method, `/v1/schedules/${encodeURIComponent(s.id)}`, body);
      setProblem(undefined);
      onChanged();
    } catch (err) {
      setProblem(problemOf(err));
    }
  };
  const what = s.call ? (
    <>
      call <code>{s.call.tool}</code> on <a href={`#/devices/${encodeURIComponent(s.call.device)}`}>{s.call.device}</a>
    </>
  ) : s.job ? (
    <>
      job <code>{s.job.tool}</code> on {filterText(s.job.filter)}
    </>
  ) : (
    <>?</>
  );
  return (
    <li class="card schedule" data-schedule={s.id} data-paused={String(s.paused)}>
      <p>
        {s.paused ? <Badge tone="off">paused</Badge> : <Badge tone="ok">active</Badge>}{' '}
        <strong>{s.cron ? <code>{s.cron}</code> : `once at ${s.at ? new Date(s.at).toLocaleString() : '?'}`}</strong>
        {s.cron && s.timeZone && <span class="muted small"> ({s.timeZone})</span>}: {what}
      </p>
      <p class="muted small">
        next run:{' '}
        {s.nextRun && !s.paused ? (
          <time class="next-run" dateTime={s.nextRun}>
            {new Date(s.nextRun).toLocaleString()}
          </time>
        ) : (
          'none'
        )}
        {s.lastRun && (
          <>
            {' '}
            · last run <Ago iso={s.lastRun} />
          </>
        )}
        {s.lastResult?.callId && ` · call ${s.lastResult.callId.slice(0, 8)}`}
        {s.lastResult?.jobId && (
          <>
            {' '}
            · <a href={`#/jobs/${encodeURIComponent(s.lastResult.jobId)}`}>job {s.lastResult.jobId.slice(0, 8)}</a>
          </>
        )}
        {s.lastResult?.error && <span class="invalid"> · {s.lastResult.error}</span>}
      </p>
      <div class="actions">
        <button type="button" class="secondary" onClick={() => void act('PATCH', { paused: !s.paused })}>
          {s.paused ? 'Resume' : 'Pause'}
        </button>
        {confirmDelete ? (
          <>
            <button type="button" class="danger" onClick={() => void act('DELETE')}>
              Delete for good
            </button>
            <button type="button" class="secondary" onClick={() => setConfirmDelete(false)}>
              Keep
            </button>
          </>
        ) : (
          <button type="button" class="secondary" onClick={() => setConfirmDelete(true)}>
            Delete…
          </button>
        )}
      </div>
      {problem && <ProblemBox problem={problem} />}
    </li>
  );
}

function NewSchedule({ onCreated }: { onCreated: () => void }) {
  const [form, setForm] = useState<ScheduleForm>(() => ({ ...EMPTY, timeZone: localTimeZone() }));
  const { busy, problem, setProblem, run } = useAction<Invalid>();
  const set = (patch: Partial<ScheduleForm>) => setForm((f) => ({ ...f, ...patch }));
  const submit = async (e: Event) => {
    e.preventDefault();
    const body = scheduleBody(form);
    if (!body.ok) return setProblem({ invalid: body.message });
    await run(async () => {
      await api<Schedule>('POST', '/v1/schedules', body.value);
      setForm({ ...EMPTY, timeZone: form.timeZone });
      onCreated();
    });
  };
  return (
    <details class="card">
      <summary>
        <h2>New schedule</h2>
      </summary>
      <form onSubmit={submit} class="schedule-form">
        <fieldset class="filters">
          <legend>When</legend>
          <label class="check">
            <input type="radio" name="when" checked={form.when === 'cron'} onChange={() => set({ when: 'cron' })} /> repeating (cron)
          </label>
          <label class="check">
            <input type="radio" name="when" checked={form.when === 'at'} onChange={() => set({ when: 'at' })} /> once
          </label>
        </fieldset>
        {form.when === 'cron' ? (
          <>
            <div class="field">
              <label for="s-cron">Cron expression</label>
              <input
                id="s-cron"
                value={form.cron}
                placeholder="0 7 * * 1-5"
                aria-describedby="s-cron-help"
                onInput={(e) => set({ cron: e.currentTarget.value })}
              />
              <p id="s-cron-help" class="muted small">
                minute hour day-of-month month day-of-week: <code>0 7 * * 1-5</code> is 07:00 on weekdays.
              </p>
            </div>
            <div class="field">
              <label for="s-tz">Time zone</label>
              <input id="s-tz" value={form.timeZone} placeholder="Europe/Berlin" onInput={(e) => set({ timeZone: e.currentTarget.value })} />
            </div>
          </>
        ) : (
          <div class="field">
            <label for="s-at">At (this browser's local time)</label>
            <input id="s-at" type="datetime-local" value={form.at} onInput={(e) => set({ at: e.currentTarget.value })} />
          </div>
        )}
        <fieldset class="filters">
          <legend>What</legend>
          <label class="check">
            <input type="radio" name="target" checked={form.target === 'call'} onChange={() => set({ target: 'call' })} /> a call to one device
          </label>
          <label class="check">
            <input type="radio" name="target" checked={form.target === 'job'} onChange={() => set({ target: 'job' })} /> a job across the fleet
          </label>
        </fieldset>
        {form.target === 'call' ? (
          <>
            <div class="field">
              <label for="s-device">Device id</label>
              <input id="s-device" value={form.device} placeholder="aa:bb:cc:dd:ee:ff" onInput={(e) => set({ device: e.currentTarget.value })} />
            </div>
            <div class="field">
              <label for="s-tool">Tool</label>
              <input id="s-tool" value={form.tool} onInput={(e) => set({ tool: e.currentTarget.value })} />
            </div>
            <div class="field">
              <label for="s-args">Arguments (JSON object)</label>
              <textarea id="s-args" rows={2} spellcheck={false} value={form.arguments} onInput={(e) => set({ arguments: e.currentTarget.value })} />
            </div>
          </>
        ) : (
          <JobFields form={form.job} set={(job) => set({ job })} idBase="s-job" />
        )}
        <button type="submit" disabled={busy}>
          Create schedule
        </button>
        {problem && ('invalid' in problem ? <p class="invalid">{problem.invalid}</p> : <ProblemBox problem={problem} label="Not created" />)}
      </form>
    </details>
  );
}
