import { Counter, type Registry } from 'prom-client';

/** The cluster's counters, on the gateway's registry. */
export function createClusterMetrics(registry: Registry) {
  const registers = [registry];
  return {
    forwarded: new Counter({
      name: 'voxgate_cluster_forwarded_calls_total',
      help: 'Calls forwarded to the instance holding the device, by outcome',
      labelNames: ['outcome'] as const,
      registers,
    }),
    served: new Counter({
      name: 'voxgate_cluster_served_calls_total',
      help: 'Calls served for other instances, by outcome',
      labelNames: ['outcome'] as const,
      registers,
    }),
    takeovers: new Counter({
      name: 'voxgate_cluster_takeovers_total',
      help: 'Local connections closed because the device connected to another instance',
      registers,
    }),
    instancesLost: new Counter({
      name: 'voxgate_cluster_instances_lost_total',
      help: 'Other instances found gone (stopped, or silent for 3 heartbeats)',
      registers,
    }),
    replays: new Counter({
      name: 'voxgate_cluster_event_replays_total',
      help: 'Last-Event-ID looked up in the cluster event stream, by outcome (replayed, not_found, failed)',
      labelNames: ['outcome'] as const,
      registers,
    }),
    eventsRefused: new Counter({ name: 'voxgate_cluster_events_refused_total', help: 'Events from NATS refused (malformed, too large)', registers }),
  };
}

export type ClusterMetrics = ReturnType<typeof createClusterMetrics>;
