/**
 * The MQTT+UDP voice rows against the peer users deploy, 78/xiaozhi-mqtt-gateway (bench/lib/mqtt-gateway-peer.ts):
 * the same devices, voice server and pacing as the gateway's slices, taken alternately with them. Ratio >= 1 means
 * Voxgate is ahead (more frames per second, less CPU per frame, a shorter round trip, less memory). The goal:
 * at least as fast and at least as light per session.
 */
import type { StartedPeer } from '../lib/mqtt-gateway-peer.js';
import type { Bench } from './bench.js';
import { ratio, residentRatio, round, type Mem } from './measure.js';
import { memOf, type Relayed } from './voice.js';

const PEER = '78/xiaozhi-mqtt-gateway';

const peerName = (p: StartedPeer) => (p.commit ? `${PEER}@${p.commit.slice(0, 7)}` : PEER);

/** Idle memory, after GC: the voice gateway (everything it serves) against the peer (the MQTT+UDP relay alone). */
export function pushPeerIdleRow(b: Bench, gateway: Mem, peer: Mem, p: StartedPeer): void {
  b.results.push({
    name: 'voice_udp.vs_peer.idle_rss',
    value: gateway.rss,
    unit: 'B',
    floor: peer.rss,
    ratio: ratio(peer.rss, gateway.rss),
    params: { peer: peerName(p), heapUsed: gateway.heapUsed, peerHeapUsed: peer.heapUsed, afterGc: true },
  });
}

export function pushPeerRows(b: Bench, label: string, r: { pace: string; devices: number; window: number }, g: Relayed, p: Relayed, peer: StartedPeer): void {
  const errs = (x: Relayed) => x.lost + x.corrupt + x.connectFailures;
  const base = {
    transport: label,
    pace: r.pace,
    devices: r.devices,
    ...(r.pace === 'saturate' ? { window: r.window } : { frameMs: 60 }),
    peer: peerName(peer),
    errors: errs(g),
    peerErrors: errs(p),
    load: g.load,
    peerLoad: p.load,
    note: 'floor = the peer; ratio >= 1: Voxgate ahead',
  };
  b.results.push({
    name: 'voice_udp.vs_peer.frames_per_s',
    value: round(g.perSecond),
    unit: 'frames/s',
    floor: round(p.perSecond),
    ratio: ratio(g.perSecond, p.perSecond),
    params: { ...base, frames: g.received, peerFrames: p.received, peerLost: p.lost, peerCorrupt: p.corrupt },
  });
  b.results.push({
    name: 'voice_udp.vs_peer.cpu_us_per_frame',
    value: round(g.cpuUsPerFrame),
    unit: 'µs',
    floor: round(p.cpuUsPerFrame),
    ratio: ratio(p.cpuUsPerFrame, g.cpuUsPerFrame),
    params: { ...base, split: g.split, peerSplit: p.split },
  });
  b.results.push({
    name: 'voice_udp.vs_peer.rtt_p50_ms',
    value: round(g.p50, 3),
    unit: 'ms',
    floor: round(p.p50, 3),
    ratio: ratio(p.p50, g.p50),
    params: { ...base, peerP99: round(p.p99, 3), p99: round(g.p99, 3) },
  });
  if (r.pace === 'paced') {
    const m = residentRatio(memOf(p), memOf(g));
    b.results.push({
      name: 'voice_udp.vs_peer.rss_per_session',
      value: round(g.rssPerSession),
      unit: 'B',
      floor: round(p.rssPerSession),
      ratio: m.ratio,
      params: {
        ...base,
        afterGc: true,
        livePerSession: round(g.livePerSession),
        peerLivePerSession: round(p.livePerSession),
        liveRatio: m.liveRatio,
        residentNote: m.note,
      },
    });
  }
}
