import type { JobForm } from '../lib/fleet.js';

/** The fields of a fleet job (a tool, its arguments, which devices, rollout controls); shared by the jobs and schedules pages. */
export function JobFields({ form, set, idBase }: { form: JobForm; set: (f: JobForm) => void; idBase: string }) {
  const field = (k: keyof JobForm, label: string, o: { placeholder?: string; type?: string; help?: string; area?: boolean } = {}) => (
    <div class="field">
      <label for={`${idBase}-${k}`}>{label}</label>
      {o.area ? (
        <textarea
          id={`${idBase}-${k}`}
          rows={2}
          spellcheck={false}
          value={form[k]}
          placeholder={o.placeholder}
          onInput={(e) => set({ ...form, [k]: e.currentTarget.value })}
        />
      ) : (
        <input
          id={`${idBase}-${k}`}
          type={o.type ?? 'text'}
          value={form[k]}
          placeholder={o.placeholder}
          step={o.type === 'number' ? 'any' : undefined}
          onInput={(e) => set({ ...form, [k]: e.currentTarget.value })}
        />
      )}
      {o.help && <p class="muted small">{o.help}</p>}
    </div>
  );
  return (
    <>
      {field('tool', 'Tool', { placeholder: 'self.audio_speaker.set_volume', help: "The device tool's own name (as on a device's page)." })}
      {field('arguments', 'Arguments (JSON object)', { placeholder: '{"volume": 40}', area: true })}
      <fieldset class="filters">
        <legend>Devices (all named conditions must match)</legend>
        {field('tags', 'Tags', { placeholder: 'kitchen, speaker' })}
        {field('room', 'Room')}
        {field('firmware', 'Firmware')}
        {field('board', 'Board')}
        {field('ids', 'Device ids', { placeholder: 'aa:bb:cc:dd:ee:ff, …' })}
      </fieldset>
      <fieldset class="filters">
        <legend>Rollout</legend>
        {field('concurrency', 'Concurrency', { type: 'number' })}
        {field('ratePerSecond', 'Calls per second', { type: 'number' })}
        {field('abortOverPercent', 'Abort over % failed', { type: 'number' })}
        {field('ttlSeconds', 'Time to live (s)', {
          type: 'number',
          help: 'An offline device gets the call when it returns, within this time.',
        })}
      </fieldset>
    </>
  );
}

/** A job's device filter in words. */
export function filterText(f: { tags?: string[]; room?: string; firmware?: string; board?: string; ids?: string[] } | undefined): string {
  if (!f) return 'every device';
  const parts = [
    f.tags?.length ? `tags ${f.tags.join(', ')}` : '',
    f.room ? `room ${f.room}` : '',
    f.firmware ? `firmware ${f.firmware}` : '',
    f.board ? `board ${f.board}` : '',
    f.ids?.length ? `${f.ids.length} device${f.ids.length === 1 ? '' : 's'} by id` : '',
  ].filter(Boolean);
  return parts.join(' · ') || 'every device';
}
