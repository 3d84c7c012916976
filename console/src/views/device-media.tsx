import { useEffect, useState } from 'preact/hooks';
import { ApiError, api, authHeaders, devicePath, problemOfResponse } from '../lib/api.js';
import { useCoalesced, useLoad, useOnEvent } from '../lib/hooks.js';
import type { FirmwarePreview, Photo, Problem } from '../lib/types.js';
import { Badge, Loading, ProblemBox, Ago } from '../components.js';

/** What the device runs, and what its next OTA check would be offered (GET /v1/devices/{id}/firmware). */
export function FirmwarePanel({ id, running }: { id: string; running: string | null }) {
  const preview = useLoad((signal) => api<FirmwarePreview>('GET', `${devicePath(id)}/firmware`, undefined, { signal }), [id]);
  const p = preview.data;
  return (
    <section class="card" aria-labelledby="firmware-h">
      <h2 id="firmware-h">Firmware</h2>
      {preview.problem && <ProblemBox problem={preview.problem} />}
      {!p && preview.loading && <Loading what="the firmware offer" />}
      {p && (
        <dl class="facts" data-testid="firmware-offer" data-source={p.source}>
          <dt>Runs</dt>
          <dd class="fw-running">{running ?? p.reported?.version ?? 'unknown'}</dd>
          <dt>Offered</dt>
          <dd class="fw-offer">{p.offer.url ? p.offer.version : 'nothing'}</dd>
          <dt>Why</dt>
          <dd class="fw-why">{why(p)}</dd>
          {p.offer.url && (
            <>
              <dt>Image</dt>
              <dd>
                <code>{p.offer.url}</code>
                {p.offer.size !== undefined && ` · ${(p.offer.size / 1024).toFixed(0)} KiB`}
                {p.offer.sha256 && (
                  <>
                    {' · sha256 '}
                    <code title={p.offer.sha256}>{p.offer.sha256.slice(0, 12)}…</code>
                  </>
                )}
                {p.offer.force ? ' · forced' : ''}
              </dd>
            </>
          )}
        </dl>
      )}
      <p class="muted small">
        A device installs the offer at its next OTA check (boot) when it is newer than what it runs{p?.offer.force ? ', or because it is forced' : ''}.
        Rollouts: docs/firmware-updates.md.
      </p>
    </section>
  );
}

function why(p: FirmwarePreview): string {
  if (p.source === 'rollout' && p.rollout)
    return p.rollout.listed
      ? `rollout ${p.rollout.version}: this device is listed`
      : `rollout ${p.rollout.version} at ${p.rollout.percent} %: this device is at ${p.rollout.bucket.toFixed(1)}`;
  if (p.source === 'baseline') return 'the fleet baseline (ota.firmwareVersion / firmwareUrl)';
  return p.reported
    ? 'no rollout covers this device and no baseline image is set'
    : 'no rollout covers this device (it has not checked in since the gateway started) and no baseline image is set';
}

/** The photos the device took for vision questions, newest first; a new one appears live (device.photo). */
export function PhotosPanel({ id }: { id: string }) {
  const photos = useLoad(
    async (signal) => {
      try {
        return await api<{ photos: Photo[] }>('GET', `${devicePath(id)}/photos`, undefined, { signal });
      } catch (e) {
        // The route exists only while the gateway serves vision (vision.serve).
        if (e instanceof ApiError && e.problem.code === 'NOT_FOUND') return null;
        throw e;
      }
    },
    [id],
  );
  const reload = useCoalesced(photos.reload, 400);
  useOnEvent((e) => {
    if (e === 'resync' || (e.type === 'device.photo' && e.deviceId === id)) reload();
  });
  const list = photos.data?.photos ?? [];
  return (
    <section class="card" aria-labelledby="photos-h">
      <h2 id="photos-h">Photos {photos.data && <span class="muted">({list.length})</span>}</h2>
      {photos.problem && <ProblemBox problem={photos.problem} />}
      {photos.data === undefined && photos.loading && <Loading what="photos" />}
      {photos.data === null && <p class="muted">This gateway keeps no photos (vision.serve is off).</p>}
      {photos.data && list.length === 0 && <p class="muted">No photo yet. A device with a camera sends one when its take_photo tool runs.</p>}
      <ul class="photos">
        {list.slice(0, 20).map((p) => (
          <li key={p.id} data-photo={p.id}>
            <PhotoFigure deviceId={id} photo={p} />
          </li>
        ))}
      </ul>
    </section>
  );
}

const IMAGE_TYPES = /^image\/(png|jpeg|gif|webp|bmp)$/;

/** The photo route needs the API key, which an <img src> cannot send: fetch it, show it as a blob: URL. */
function PhotoFigure({ deviceId, photo: p }: { deviceId: string; photo: Photo }) {
  const [src, setSrc] = useState<string>();
  const [problem, setProblem] = useState<Problem>();
  useEffect(() => {
    const abort = new AbortController();
    let url: string | undefined;
    void (async () => {
      try {
        const res = await fetch(`${devicePath(deviceId)}/photos/${encodeURIComponent(p.id)}`, { headers: authHeaders(), signal: abort.signal });
        if (!res.ok) return setProblem(await problemOfResponse(res));
        const blob = await res.blob();
        if (!IMAGE_TYPES.test(blob.type))
          return setProblem({
            type: 'about:blank',
            title: 'Not an image',
            status: 0,
            code: 'CLIENT',
            detail: `the photo came as ${blob.type.slice(0, 64) || 'no type'}`,
          });
        url = URL.createObjectURL(blob);
        if (abort.signal.aborted) return URL.revokeObjectURL(url);
        setSrc(url);
      } catch (e) {
        if ((e as Error).name !== 'AbortError')
          setProblem({ type: 'about:blank', title: 'Network error', status: 0, code: 'NETWORK', detail: 'the photo could not be loaded' });
      }
    })();
    return () => {
      abort.abort();
      if (url) URL.revokeObjectURL(url);
    };
  }, [deviceId, p.id]);
  const at = new Date(p.at);
  return (
    <figure>
      {src ? (
        <img src={src} alt={`Photo from ${deviceId} at ${at.toLocaleString()}, taken to answer: ${p.question}`} />
      ) : (
        !problem && <Loading what="the photo" />
      )}
      {problem && <ProblemBox problem={problem} />}
      <figcaption>
        <q>{p.question}</q>{' '}
        <span class="muted small">
          <Ago iso={p.at} /> · {(p.bytes / 1024).toFixed(0)} KiB <Badge tone="info">{p.mimeType.replace('image/', '')}</Badge>
        </span>
      </figcaption>
    </figure>
  );
}
