import { Counter, Gauge, type Registry } from 'prom-client';
import { GatewayError } from '../errors.js';
import type { ModelRequestsConfig } from './config.js';
import { FairGate, GateRefused, type GateSlot } from './fair-gate.js';
import { tenantShare } from './tenant-share.js';
import { ThrottledLog, type LevelLog } from './throttled-log.js';

export type ModelKind = 'asr' | 'tts' | 'llm' | 'vision';
export const MODEL_KINDS: readonly ModelKind[] = ['asr', 'tts', 'llm', 'vision'];

/** The share key of a caller without one (operators: principal.ts shareOf gives undefined). */
const OPERATORS = '';

/**
 * One kind's gateway-wide bound (config `modelRequests.<kind>`): at most `maxConcurrent` requests at the provider,
 * the rest wait in a bounded queue, fair between tenants (throttle/fair-gate.ts). A refusal is MODEL_BUSY (HTTP 503
 * with Retry-After), counted and logged at most once per 10 s per kind and reason: a refusal storm is exactly when a
 * line per request would flood the log.
 */
export class ModelGate {
  private readonly gate: FairGate;
  /** Seconds a refused caller is told to wait: the queue's own wait, since that is how long the backlog lasts at most. */
  readonly retryAfterSeconds: number;

  constructor(
    readonly kind: ModelKind,
    private readonly limits: ModelRequestsConfig[ModelKind],
    private readonly m: GateMetrics,
    private readonly lines: ThrottledLog,
  ) {
    this.retryAfterSeconds = Math.max(1, Math.ceil(limits.maxWaitMs / 1000));
    const gateLimits = { ...limits, maxConcurrentPerShare: maxConcurrentPerTenant(limits), maxWaitingPerShare: limits.maxWaitingPerTenant };
    this.gate = new FairGate(gateLimits, (inFlight, waiting) => {
      m.inFlight.set({ kind }, inFlight);
      m.waiting.set({ kind }, waiting);
    });
  }

  get inFlight(): number {
    return this.gate.inFlight;
  }

  get waiting(): number {
    return this.gate.waiting;
  }

  /**
   * A slot for one request of `share` (principal.ts shareOf); MODEL_BUSY when refused, the signal's reason when it
   * aborts first (the waiter is gone from the queue then). The caller releases the slot in a `finally`.
   */
  async acquire(share: string | undefined, signal?: AbortSignal): Promise<GateSlot> {
    try {
      return await this.gate.acquire(share ?? OPERATORS, signal);
    } catch (e) {
      if (!(e instanceof GateRefused)) throw e;
      this.m.refused.inc({ kind: this.kind, reason: e.reason });
      this.lines.write(
        { kind: this.kind, reason: e.reason, inFlight: this.gate.inFlight, waiting: this.gate.waiting, maxConcurrent: this.limits.maxConcurrent },
        `${this.kind} request refused: ${e.message} (modelRequests.${this.kind})`,
        `${this.kind}:${e.reason}`,
      );
      throw new GatewayError('MODEL_BUSY', `the ${KIND_NAMES[this.kind]} service is busy (${e.message}); try again in ${this.retryAfterSeconds} s`, {
        retryAfterSeconds: this.retryAfterSeconds,
        kind: this.kind,
        reason: e.reason,
      });
    }
  }

  /** Runs `fn` holding a slot, freed however it ends. */
  async run<T>(share: string | undefined, signal: AbortSignal | undefined, fn: () => Promise<T>): Promise<T> {
    const slot = await this.acquire(share, signal);
    try {
      return await fn();
    } finally {
      slot.release();
    }
  }
}

/**
 * Slots one tenant may hold: as configured, else three quarters of the kind's (rounded up, so a gate of one or two
 * slots is not split). Round-robin orders only the waiters: without a cap per tenant, one tenant whose requests outlast
 * the wait (speech streamed at real time to many devices, devices without a tenant that anyone can enroll where
 * enrollment is open) held every slot, and every other tenant's requests were refused MODEL_BUSY.
 */
export function maxConcurrentPerTenant(limits: { maxConcurrent: number; maxConcurrentPerTenant?: number | undefined }): number {
  return tenantShare(limits.maxConcurrent, limits.maxConcurrentPerTenant);
}

const KIND_NAMES: Record<ModelKind, string> = { asr: 'speech recognition', tts: 'speech synthesis', llm: 'assistant model', vision: 'vision' };

export type ModelGates = Record<ModelKind, ModelGate>;

interface GateMetrics {
  inFlight: Gauge<'kind'>;
  waiting: Gauge<'kind'>;
  refused: Counter<'kind' | 'reason'>;
}

/** The four gates, their metrics registered once on `registry`. */
export function createModelGates(config: ModelRequestsConfig, registry: Registry, log: LevelLog): ModelGates {
  const m: GateMetrics = {
    inFlight: new Gauge({
      name: 'voxgate_model_requests_in_flight',
      help: 'Requests at a model service now (asr, tts, llm, vision), bounded by modelRequests.<kind>.maxConcurrent',
      labelNames: ['kind'],
      registers: [registry],
    }),
    waiting: new Gauge({
      name: 'voxgate_model_requests_waiting',
      help: 'Requests waiting for a slot at a model service (modelRequests.<kind>.maxWaiting)',
      labelNames: ['kind'],
      registers: [registry],
    }),
    refused: new Counter({
      name: 'voxgate_model_requests_refused_total',
      help: 'Model requests refused by the gateway-wide bound: queue_full, tenant_queue_full or wait_timeout',
      labelNames: ['kind', 'reason'],
      registers: [registry],
    }),
  };
  const lines = new ThrottledLog(log, 'warn', { linesPerWindow: 1, windowMs: 10_000, maxKeys: 16 });
  for (const kind of MODEL_KINDS) {
    m.inFlight.set({ kind }, 0);
    m.waiting.set({ kind }, 0);
  }
  return Object.fromEntries(MODEL_KINDS.map((kind) => [kind, new ModelGate(kind, config[kind], m, lines)])) as ModelGates;
}
