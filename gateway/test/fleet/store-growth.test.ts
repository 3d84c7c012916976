import { statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { mac, removeDir, startRig, tempDir } from './fleet-parts.js';

/**
 * What the store grows by, per queued call and per job (the figures docs/fleet.md quotes). Sizes, not
 * times: the bounds below hold on any machine. Run with FLEET_GROWTH_LOG=1 to print the figures.
 */
describe('store growth of queued calls and jobs', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) removeDir(d);
  });

  const fileBytes = async (dir: string) => {
    // Closing checkpoints the WAL into the database file: its size is what the data takes.
    const s = new SqliteStore(join(dir, 'voxgate.db'));
    await s.close();
    return statSync(join(dir, 'voxgate.db')).size;
  };

  it('is about half a kilobyte per queued call, and one document per job', async () => {
    const dir = tempDir();
    dirs.push(dir);
    const N = 5000;
    const r = await startRig(dir);
    for (let i = 0; i < N; i++) r.fake.add(mac(i), { board: 'esp32-s3-box' });
    await r.stop();
    const empty = await fileBytes(dir);

    const again = await startRig(dir, { fake: r.fake });
    const job = await again.fleet.jobs.create({
      tool: 'self.audio_speaker.set_volume',
      arguments: { volume: 40 },
      filter: { board: 'esp32-s3-box' },
      concurrency: 10,
    });
    const single = await again.fleet.calls.enqueue({ deviceId: mac(1), tool: 'self.audio_speaker.set_volume', arguments: { volume: 40 } });
    const callJson = Buffer.byteLength(JSON.stringify(again.fleet.calls.get(single.id)));
    const jobJson = Buffer.byteLength(JSON.stringify(again.fleet.jobs.get(job.id)));
    await again.stop();
    const full = await fileBytes(dir);
    const perCall = (full - empty) / (N + 1);

    // The same calls finished with a small result ("true"), as a device answers set_volume.
    const third = await startRig(dir, { fake: r.fake });
    for (const id of r.fake.devices.keys()) r.fake.connect(id);
    await third.fake.event((e) => e.type === 'job.progress' && e.data['state'] === 'succeeded');
    const doneJson = Buffer.byteLength(JSON.stringify(third.fleet.calls.forDevice(mac(2), { limit: 1 }).calls[0]));
    await third.stop();
    const finished = await fileBytes(dir);
    const perFinished = (finished - empty) / (N + 1);

    if (process.env['FLEET_GROWTH_LOG']) console.log({ empty, full, finished, perCall, perFinished, callJson, jobJson, doneJson });
    expect(perCall).toBeLessThan(1024);
    expect(perFinished).toBeLessThan(1536);
    expect(jobJson).toBeLessThan(1024);
  }, 180_000);
});
