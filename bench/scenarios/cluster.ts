import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startNatsServer, type NatsServer } from '../../test/support/nats-server.js';
import { startGateway } from '../lib/compiled.js';
import { gatewayEnv } from '../lib/gateway-env.js';
import type { Proc } from '../lib/procs.js';
import { API_KEY, CONCURRENCY, GATEWAY_START_MS, QUEUE_LIMIT, type Bench } from './bench.js';
import type { Env } from './env.js';
import { allDevices, callOutcomes, callPath, errorsOf, loadOnce, mem, metric, notOk, ratio, round, until } from './measure.js';

/**
 * Two gateway instances on one nats-server, every device on instance A: the same call through A (the owning
 * instance: the floor) and through B (forwarded to A by NATS request-reply), same devices, same run. Also what each
 * instance holds: devices and RSS per device on A, and what B grows by for devices it only knows of (presence).
 */
export async function clusterScenarios(bench: Bench, e: Env, dataDir: string): Promise<void> {
  let nats: NatsServer | undefined;
  const killNats = () => nats?.child.kill('SIGKILL');
  process.on('exit', killNats);
  const instances: Proc[] = [];
  try {
    nats = await startNatsServer();
    const n = bench.clusterDevices;
    const start = async (id: string) => {
      const dir = join(dataDir, `cluster-${id}`);
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, 'config.json'), '{}');
      const { proc, url, httpPort } = await startGateway(`cluster-${id}`, {
        env: async (ports) => ({
          ...(await gatewayEnv({ dataDir: dir, apiKey: API_KEY, configFile: join(dir, 'config.json'), ...ports })).env,
          GATEWAY_CALL_QUEUE_LIMIT: String(QUEUE_LIMIT),
          GATEWAY_WS_MAX_CONNECTIONS: String(n + 100),
          GATEWAY_HTTP_MAX_CONNECTIONS_PER_ADDRESS: String(n + 300),
          GATEWAY_CLUSTER_ENABLED: 'true',
          GATEWAY_CLUSTER_INSTANCE_ID: `bench-${id}`,
          GATEWAY_CLUSTER_NATS_SERVERS: nats!.url,
        }),
        readyMs: GATEWAY_START_MS,
      });
      instances.push(proc);
      return { proc, url, port: httpPort };
    };
    const a = await start('a');
    const b = await start('b');
    bench.log(`cluster: nats ${nats.url}; instance a ${a.url}, b ${b.url}`);

    const [a0, b0] = [await mem(a.proc), await mem(b.proc)];
    const macGroup = 7;
    const timeoutMs = Math.max(60_000, n * 20);
    const c = await e.fleet.connect({
      group: 'cluster',
      mode: 'device',
      waitFor: 'ready',
      transport: 'ws',
      url: `ws://127.0.0.1:${a.port}/xiaozhi/v1/`,
      count: n,
      macGroup,
      sources: [],
      timeoutMs,
    });
    if (!c.ok) throw new Error(`cluster: devices did not connect (${JSON.stringify(c.stats)})`);
    await until('cluster devices ready on instance a', async () => (await metric(a.url, 'voxgate_devices_ready')) >= n, timeoutMs);
    // B answers for a device once its presence entry has reached B: the cluster-wide listing shows them all online.
    await until('instance b to list every device online', async () => (await allDevices(b.url)).devices.filter((d) => d.online).length >= n, timeoutMs, 200);
    const [a1, b1] = [await mem(a.proc), await mem(b.proc)];
    const held = { a: await metric(a.url, 'voxgate_devices_connected'), b: await metric(b.url, 'voxgate_devices_connected') };
    bench.log(
      `cluster: ${n} devices on a (${held.a} connected), b holds ${held.b}; a rss +${((a1.rss - a0.rss) / n).toFixed(0)} B/device, b +${((b1.rss - b0.rss) / n).toFixed(0)} B/device`,
    );
    const perDevice = (x: number, y: number) => round((y - x) / n);
    bench.results.push({
      name: 'cluster.devices_per_instance',
      value: held.a,
      unit: 'devices',
      floor: null,
      ratio: null,
      params: { devices: n, instance: 'a (owning)', otherInstance: held.b },
    });
    bench.results.push({
      name: 'cluster.rss_per_device',
      value: perDevice(a0.rss, a1.rss),
      unit: 'B',
      floor: null,
      ratio: null,
      params: { devices: n, instance: 'a (owning)', rssBefore: a0.rss, rssAfter: a1.rss, heapPerDevice: perDevice(a0.heapUsed, a1.heapUsed), afterGc: true },
    });
    bench.results.push({
      name: 'cluster.peer_rss_per_device',
      value: perDevice(b0.rss, b1.rss),
      unit: 'B',
      floor: null,
      ratio: null,
      params: {
        devices: n,
        instance: 'b (holds none)',
        rssBefore: b0.rss,
        rssAfter: b1.rss,
        heapPerDevice: perDevice(b0.heapUsed, b1.heapUsed),
        afterGc: true,
      },
    });

    for (const concurrency of CONCURRENCY) {
      const before = {
        a: await callOutcomes(a.url),
        b: await callOutcomes(b.url),
        fwd: await metric(b.url, 'voxgate_cluster_forwarded_calls_total', { outcome: 'ok' }),
      };
      const owning = await loadOnce(bench, a.url, callPath(macGroup, n), concurrency, API_KEY);
      const forwarded = await loadOnce(bench, b.url, callPath(macGroup, n), concurrency, API_KEY);
      const after = {
        a: await callOutcomes(a.url),
        b: await callOutcomes(b.url),
        fwd: await metric(b.url, 'voxgate_cluster_forwarded_calls_total', { outcome: 'ok' }),
      };
      const errors = errorsOf(forwarded) + notOk(before.b, after.b);
      const floorErrors = errorsOf(owning) + notOk(before.a, after.a);
      const params = {
        path: 'HTTP -> instance b -> NATS -> instance a -> device',
        floorPath: 'HTTP -> instance a -> device',
        devices: n,
        concurrency,
        seconds: round(forwarded.seconds, 2),
        calls: forwarded.ok,
        floorCalls: owning.ok,
        // Every forwarded call (and the warm-up's) went over NATS: B counts it as forwarded ok.
        forwardedOk: after.fwd - before.fwd,
        errors,
        floorErrors,
        statusCodes: forwarded.statusCodes,
      };
      bench.results.push({
        name: 'cluster.calls_per_s',
        value: round(forwarded.perSecond),
        unit: 'calls/s',
        floor: round(owning.perSecond),
        ratio: ratio(forwarded.perSecond, owning.perSecond),
        params,
      });
      const lat = { devices: n, concurrency, errors, floorErrors };
      bench.results.push({
        name: 'cluster.p50_ms',
        value: round(forwarded.p50, 3),
        unit: 'ms',
        floor: round(owning.p50, 3),
        ratio: ratio(owning.p50, forwarded.p50),
        params: { ...lat, addedMs: round(forwarded.p50 - owning.p50, 3) },
      });
      bench.results.push({
        name: 'cluster.p99_ms',
        value: round(forwarded.p99, 3),
        unit: 'ms',
        floor: round(owning.p99, 3),
        ratio: ratio(owning.p99, forwarded.p99),
        params: { ...lat, addedMs: round(forwarded.p99 - owning.p99, 3) },
      });
      bench.log(
        `cluster d=${n} c=${concurrency}: via b ${forwarded.perSecond.toFixed(0)}/s p50 ${forwarded.p50.toFixed(2)} ms, via a ${owning.perSecond.toFixed(0)}/s p50 ${owning.p50.toFixed(2)} ms; errors ${errors}/${floorErrors}`,
      );
    }
    await e.fleet.close('cluster');
  } finally {
    await Promise.all(instances.map((p) => p.stop()));
    await nats?.stop();
    process.off('exit', killNats);
  }
}
