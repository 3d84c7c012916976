/**
 * The bench harness in its tiny mode (20 devices, a few hundred calls, a 2 s soak, a few voice sessions, four conversations, two clustered
 * instances on a real nats-server): real processes, real sockets. Checks correctness only — the JSON file's shape, every scenario present, no errors,
 * no pending call left after the soak. Never a speed: timing lives in the figures, not in a test.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

const ResultsFile = z
  .object({
    date: z.iso.datetime(),
    machine: z
      .object({ cpus: z.number().int().positive(), model: z.string().min(1), memGiB: z.number().positive(), node: z.string().startsWith('v') })
      .strict(),
    results: z.array(
      z
        .object({
          name: z.string().min(1),
          value: z.number(),
          unit: z.string().min(1),
          floor: z.number().nullable(),
          ratio: z.number().nullable(),
          params: z.record(z.string(), z.unknown()),
        })
        .strict(),
    ),
  })
  .strict();

function runBench(out: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['bench/run.sh', '--tiny', '--out', out], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('bench harness (tiny mode)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'voxgate-bench-test-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('runs every scenario against its floor, writes the results file, and leaves no error or pending call', { timeout: 360_000 }, async () => {
    const out = join(dir, 'tiny.json');
    const run = await runBench(out);
    expect(run.code, run.stderr.slice(-3000)).toBe(0);
    expect(run.stdout).toContain('benchmark');

    const doc = ResultsFile.parse(JSON.parse(readFileSync(out, 'utf8')));
    const names = new Set(doc.results.map((r) => r.name));
    for (const name of [
      'ws.calls_per_s',
      'ws.p50_ms',
      'ws.p99_ms',
      'ws.cpu_us_per_call',
      'mqtt.calls_per_s',
      'mqtt.p50_ms',
      'mqtt.p99_ms',
      'mqtt.cpu_us_per_call',
      'mqtt_vs_ws.calls_per_s',
      'fleet.ready_per_s',
      'fleet.cpu_us_per_device',
      'fleet.ready_per_s_vs_writes',
      'fleet.cpu_us_per_device_vs_writes',
      'fleet.rss_per_device',
      'fleet.heap_per_device',
      'storm.ready_ms',
      'storm.ready_per_s',
      'storm.calls_after_ok',
      'storm.ready_per_s_vs_writes',
      'storm.cpu_us_per_device_vs_writes',
      'soak.calls_per_s',
      'soak.heap_after_gc',
      'soak.pending_end',
      'soak.errors',
      'idle.rss',
      'voice.idle_rss',
      'voice_ws.frames_per_s',
      'voice_ws.cpu_us_per_frame',
      'voice_ws.rss_per_session',
      'voice_ws.rtt_p50_ms',
      'voice_ws.rtt_p99_ms',
      'voice_udp.frames_per_s',
      'voice_udp.cpu_us_per_frame',
      'voice_udp.rss_per_session',
      'voice_udp.rtt_p50_ms',
      'voice_udp.rtt_p99_ms',
      'cluster.devices_per_instance',
      'cluster.rss_per_device',
      'cluster.peer_rss_per_device',
      'cluster.calls_per_s',
      'cluster.p50_ms',
      'cluster.p99_ms',
      'converse.own_latency_p50_ms',
      'converse.concurrent_answered',
      'converse.cpu_ms_per_audio_s',
      'converse.audio_path_ms_per_audio_s',
    ])
      expect(names, name).toContain(name);

    // Call paths: every (devices, concurrency) pair, each measured against a floor from the same run.
    for (const transport of ['ws', 'mqtt']) {
      const rows = doc.results.filter((r) => r.name === `${transport}.calls_per_s`);
      expect(rows.map((r) => `${String(r.params['devices'])}/${String(r.params['concurrency'])}`).sort()).toEqual([
        '1/1',
        '1/16',
        '1/64',
        '100/1',
        '100/16',
        '100/64',
      ]);
      for (const r of rows) {
        expect(r.floor).not.toBeNull();
        expect(r.ratio).not.toBeNull();
      }
    }
    // Relayed audio: at the frame rate and saturated, over both transports, each against the direct floor; every
    // frame sent came back byte-exact (errors and floorErrors below count lost and corrupt echoes).
    for (const transport of ['ws', 'udp']) {
      const rows = doc.results.filter((r) => r.name === `voice_${transport}.frames_per_s`);
      expect(rows.map((r) => r.params['pace']).sort()).toEqual(['paced', 'saturate']);
      for (const r of rows) {
        expect(r.floor).not.toBeNull();
        expect(r.ratio).not.toBeNull();
        expect(r.params['frames']).toBe(r.params['sent']);
        expect(r.params['frames']).toBeGreaterThan(0);
        expect(r.params['floorFrames']).toBeGreaterThan(0);
      }
    }
    // Conversations: every device's turn answered with audio (correctness; how fast is the figures' business).
    const answered = doc.results.find((r) => r.name === 'converse.concurrent_answered')!;
    expect(answered.value).toBe(answered.floor);
    expect(answered.params['failed']).toBe(0);
    expect(answered.params['framesDown']).toBeGreaterThan(0);
    // Cluster: every device on the owning instance, none on the other; each call through the other instance went
    // over NATS (B counts it forwarded; the warm-up's too), measured against the owning instance in the same run.
    const held = doc.results.find((r) => r.name === 'cluster.devices_per_instance')!;
    expect(held.value).toBe(20);
    expect(held.params['otherInstance']).toBe(0);
    const clusterRows = doc.results.filter((r) => r.name === 'cluster.calls_per_s');
    expect(clusterRows.map((r) => r.params['concurrency'])).toEqual([1, 16, 64]);
    for (const r of clusterRows) {
      expect(r.floor).not.toBeNull();
      expect(r.ratio).not.toBeNull();
      expect(r.params['calls']).toBeGreaterThan(0);
      expect(r.params['floorCalls']).toBeGreaterThan(0);
      expect(r.params['forwardedOk']).toBeGreaterThanOrEqual(r.params['calls'] as number);
    }
    // No errors anywhere, and nothing left pending after the soak.
    for (const r of doc.results) if ('errors' in r.params) expect(r.params['errors'], `${r.name} ${JSON.stringify(r.params)}`).toBe(0);
    for (const r of doc.results) if ('floorErrors' in r.params) expect(r.params['floorErrors'], r.name).toBe(0);
    expect(doc.results.find((r) => r.name === 'soak.pending_end')!.value).toBe(0);
    expect(doc.results.find((r) => r.name === 'soak.errors')!.value).toBe(0);
    const after = doc.results.find((r) => r.name === 'storm.calls_after_ok')!;
    expect(after.value).toBe(after.floor);
    // Fleet size is the tiny one; every device came back.
    expect(doc.results.find((r) => r.name === 'fleet.ready_per_s')!.params['devices']).toBe(20);
    // The writing floor committed what the gateway did: a record and two history rows per new device, three
    // history rows per device in the storm and no record (the gateway holds a re-dialling device's last seen).
    // (A device that had to retry its connection may add an online row on either side: at least, not exactly.)
    for (const [name, events, records] of [
      ['fleet.ready_per_s_vs_writes', 40, 20],
      ['storm.ready_per_s_vs_writes', 60, 0],
    ] as const) {
      const p = doc.results.find((r) => r.name === name)!.params as { floorRows: { events: number; records: number }; gatewayHistoryRows: number };
      expect(p.floorRows.records, name).toBe(records);
      expect(p.floorRows.events, name).toBeGreaterThanOrEqual(events);
      expect(p.gatewayHistoryRows, name).toBeGreaterThanOrEqual(events);
    }
  });
});
