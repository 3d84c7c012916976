import { z } from 'zod';
import { Bool, Csv, env, Ms } from '../config/fields.js';

const Name = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/);

/** Many instances on NATS (docs/scaling.md). Off: one process, no external service. */
export const ClusterSlice = z.strictObject({
  enabled: env('GATEWAY_CLUSTER_ENABLED', Bool.default(false), 'many instances on NATS: see [docs/scaling.md](docs/scaling.md)'),
  /** This instance's name: NATS subjects and presence entries carry it; unique per instance. Default: a random one per start. */
  instanceId: env(
    'GATEWAY_CLUSTER_INSTANCE_ID',
    z
      .string()
      .regex(/^[A-Za-z0-9_-]{1,64}$/, 'letters, digits, "_" or "-" (at most 64)')
      .optional(),
    "this instance's name, unique per instance",
    'a random one per start',
  ),
  nats: z
    .strictObject({
      servers: env('GATEWAY_CLUSTER_NATS_SERVERS', Csv.default(['nats://127.0.0.1:4222']), 'comma-separated NATS URLs'),
      /** A NATS .creds file (JWT + nkey seed) for authenticated clusters. */
      credsFile: env('GATEWAY_CLUSTER_NATS_CREDS_FILE', z.string().min(1).max(4096).optional(), 'a NATS `.creds` file for authenticated clusters'),
    })
    .prefault({}),
  /** Key-value bucket holding presence and catalogs; events go to subjects under `voxgate.events.`. */
  bucket: Name.default('voxgate'),
  /** Each instance announces itself this often; one silent for 3 heartbeats is dead (its devices offline, calls to it failed). */
  heartbeatMs: env('GATEWAY_CLUSTER_HEARTBEAT_MS', Ms(2_000, 60_000), 'each instance announces itself this often; one silent for 3 heartbeats is dead'),
  /** Bytes of one forwarded call's request or reply (NATS's own max_payload is 1 MiB by default). */
  maxMessageBytes: z.coerce
    .number()
    .int()
    .min(4096)
    .max(8 * 1024 * 1024)
    .default(1024 * 1024),
  /** Key-value bucket of the persisted state every instance shares (enrollments): the store with the cluster on. */
  storeBucket: Name.default('voxgate-store'),
  /** The JetStream stream over `voxgate.events.>` that `Last-Event-ID` resumes from on any instance; oldest dropped first. */
  events: z
    .strictObject({
      stream: Name.default('VOXGATE_EVENTS'),
      // Unset: the event history's bounds (events.history.maxEvents, maxBytes, maxAgeHours); the stream is the cluster's history.
      maxMsgs: z.coerce.number().int().min(1).max(1e9).optional(),
      // The stream's own measure: whole stored messages (subject, headers, the relayed event's JSON), not only `data`.
      maxBytes: z.coerce
        .number()
        .int()
        .min(1024 * 1024)
        .max(1024 ** 4)
        .optional(),
      maxAgeMs: z.coerce
        .number()
        .int()
        .min(1000)
        .max(366 * 86_400_000)
        .optional(),
    })
    .prefault({}),
});
export type ClusterConfig = z.infer<typeof ClusterSlice>;
