import { useEffect, useState } from 'preact/hooks';
import { api } from '../lib/api.js';
import { useAction, useLoad } from '../lib/hooks.js';
import type { PendingEnrollment, RefusedDevice } from '../lib/types.js';
import { Badge, Loading, ProblemBox, Ago, Pager } from '../components.js';

const POLL_MS = 5000;

/** Devices waiting for an operator: the code each shows and speaks, approve or reject. */
export function EnrollmentsView() {
  // Pages of up to 1 000, oldest first: the cursors of the pages before this one.
  const [cursors, setCursors] = useState<string[]>([]);
  const cursor = cursors[cursors.length - 1];
  const list = useLoad(
    (signal) =>
      api<{ enrollments: PendingEnrollment[]; nextCursor?: string }>(
        'GET',
        `/v1/enrollments${cursor ? `?cursor=${encodeURIComponent(cursor)}` : ''}`,
        undefined,
        { signal },
      ),
    [cursor],
  );
  const refused = useLoad((signal) => api<{ refused: RefusedDevice[] }>('GET', '/v1/enrollments/refused', undefined, { signal }), []);
  const [decided, setDecided] = useState<string>();
  // A device asking to join sends no event (it is not connected yet): look again now and then.
  useEffect(() => {
    const t = setInterval(() => (list.reload(), refused.reload()), POLL_MS);
    return () => clearInterval(t);
  }, [list.reload, refused.reload]);
  return (
    <section aria-labelledby="enroll-h">
      <h1 id="enroll-h">Enrollments</h1>
      <p class="muted">
        A device that checks in under <code>deviceAuth</code> hmac or token with the approve policy shows a 6-digit code. Approve it here; its next OTA check
        collects its credentials.
      </p>
      <button type="button" onClick={list.reload}>
        Refresh
      </button>
      <p role="status" class="ok">
        {decided}
      </p>
      {list.problem && <ProblemBox problem={list.problem} />}
      {!list.data && list.loading && <Loading what="enrollments" />}
      {list.data && list.data.enrollments.length === 0 && <p>No device is waiting for approval.</p>}
      <ul class="enrollments">
        {list.data?.enrollments.map((p) => (
          <EnrollmentRow key={p.code} pending={p} onDone={(msg) => (setDecided(msg), list.reload())} />
        ))}
      </ul>
      {(cursors.length > 0 || list.data?.nextCursor) && <Pager cursors={cursors} next={list.data?.nextCursor} onChange={setCursors} />}
      {refused.data && refused.data.refused.length > 0 && <RefusedDevices devices={refused.data.refused} />}
    </section>
  );
}

export function EnrollmentRow({ pending: p, onDone }: { pending: PendingEnrollment; onDone: (message: string) => void }) {
  const { busy, problem, run } = useAction();
  const decide = (verb: 'approve' | 'reject') =>
    run(async () => {
      await api('POST', `/v1/enrollments/${encodeURIComponent(p.code)}/${verb}`);
      onDone(
        verb === 'approve'
          ? `Approved ${p.deviceId} (code ${p.code}): its next OTA check collects its credentials.`
          : `Rejected ${p.deviceId} (code ${p.code}).`,
      );
    });
  return (
    <li class="enrollment card" data-code={p.code}>
      <p>
        <strong class="code">{p.code}</strong> <a href={`#/devices/${encodeURIComponent(p.deviceId)}`}>{p.deviceId}</a>{' '}
        {p.status === 'rejected' ? <Badge tone="bad">rejected</Badge> : <Badge tone="warn">pending</Badge>}
      </p>
      <p class="muted small">
        from {p.remoteAddress}
        {p.firmwareVersion ? `, firmware ${p.firmwareVersion}` : ''}
        {p.userAgent ? `, ${p.userAgent}` : ''}; asked <Ago iso={p.createdAt} />; expires {new Date(p.expiresAt).toLocaleString()}
      </p>
      {p.status === 'pending' && (
        <div class="actions">
          <button type="button" disabled={busy} onClick={() => void decide('approve')} aria-label={`Approve ${p.deviceId} (code ${p.code})`}>
            Approve
          </button>
          <button type="button" class="secondary" disabled={busy} onClick={() => void decide('reject')} aria-label={`Reject ${p.deviceId} (code ${p.code})`}>
            Reject
          </button>
        </div>
      )}
      {problem && <ProblemBox problem={problem} />}
    </li>
  );
}

/** Devices that dial in without valid credentials (e.g. a fleet moved from open to hmac): they need an OTA check. */
function RefusedDevices({ devices }: { devices: RefusedDevice[] }) {
  return (
    <section aria-labelledby="refused-h" class="refused">
      <h2 id="refused-h">Refused devices</h2>
      <p class="muted">
        These devices connect without valid credentials and are refused. A device collects its credentials from an OTA check, which the firmware makes only at
        boot: restart each one (power cycle), then approve its code above (or list its id in <code>enrollment.allowlist</code>). See docs/security.md, "Moving a
        fleet from open to hmac".
      </p>
      <table>
        <thead>
          <tr>
            <th>Device</th>
            <th>Transport</th>
            <th>Reason</th>
            <th>Tries</th>
            <th>First</th>
            <th>Last</th>
            <th>From</th>
          </tr>
        </thead>
        <tbody>
          {devices.map((d) => (
            <tr key={d.deviceId} data-refused={d.deviceId}>
              <td>{d.deviceId}</td>
              <td>{d.transport}</td>
              <td>
                <Badge tone="bad">{d.reason}</Badge>
              </td>
              <td>{d.count}</td>
              <td>
                <Ago iso={d.firstAt} />
              </td>
              <td>
                <Ago iso={d.lastAt} />
              </td>
              <td>{d.remoteAddress}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
