/**
 * Wire types of the fleet routes (the shared contract FLEET-API.md: device names/rooms/tags, queued calls,
 * jobs, schedules, event history). Kept apart from types.ts on purpose: a gateway without these routes is
 * still one the console works with (each page says "not available on this gateway").
 * gateway/test/e2e/console-contract.test.ts checks both files against the gateway's /openapi.json, and
 * FLEET_EVENT_TYPES with types.ts's EVENT_TYPES against the gateway's own list of event types.
 */
import type { CallResult, GatewayEvent } from './types.js';

export type FleetEventType = 'call.state' | 'job.progress' | 'schedule.fired';
export const FLEET_EVENT_TYPES: readonly FleetEventType[] = ['call.state', 'job.progress', 'schedule.fired'];

/** What a person gives a device (GET /v1/devices and /v1/devices/{id} carry it where the registry lasts). */
export interface DeviceMeta {
  name: string | null;
  room: string | null;
  tags: string[];
  tenant: string | null;
  board: string | null;
  firstSeenAt: string;
}
/** PATCH /v1/devices/{id} with {name?, room?, tags?}. */
export interface DeviceMetaSettings {
  id: string;
  name: string | null;
  room: string | null;
  tags: string[];
}

export type CallState = 'queued' | 'sent' | 'succeeded' | 'failed' | 'expired' | 'cancelled';
export const CALL_STATES: readonly CallState[] = ['queued', 'sent', 'succeeded', 'failed', 'expired', 'cancelled'];
export interface QueuedCall {
  id: string;
  deviceId: string;
  tool: string;
  arguments: Record<string, unknown>;
  state: CallState;
  createdAt: string;
  updatedAt: string;
  expiresAt: string;
  jobId?: string;
  result?: CallResult;
  error?: { code: string; message: string };
}
export interface QueuedCallList {
  calls: QueuedCall[];
  nextCursor?: string;
}

export interface JobFilter {
  tags?: string[];
  room?: string;
  firmware?: string;
  board?: string;
  ids?: string[];
}
export type JobState = 'running' | 'succeeded' | 'failed' | 'aborted' | 'cancelled';
export interface JobCounts {
  queued: number;
  sent: number;
  succeeded: number;
  failed: number;
  expired: number;
  cancelled: number;
}
export interface JobBody {
  tool: string;
  arguments?: Record<string, unknown>;
  filter: JobFilter;
  concurrency?: number;
  ratePerSecond?: number;
  abortOverPercent?: number;
  ttlMs?: number;
}
export interface Job extends JobBody {
  id: string;
  arguments: Record<string, unknown>;
  concurrency: number;
  ttlMs: number;
  state: JobState;
  createdAt: string;
  updatedAt: string;
  counts: JobCounts;
  total: number;
}
export interface JobList {
  jobs: Job[];
  nextCursor?: string;
}
export interface JobDevice {
  deviceId: string;
  callId: string;
  state: CallState;
  result?: CallResult;
  error?: { code: string; message: string };
}
export interface JobDeviceList {
  devices: JobDevice[];
  nextCursor?: string;
}

export interface ScheduleCall {
  device: string;
  tool: string;
  arguments?: Record<string, unknown>;
}
export interface ScheduleBody {
  cron?: string;
  timeZone?: string;
  at?: string;
  call?: ScheduleCall;
  job?: JobBody;
}
export interface Schedule extends ScheduleBody {
  id: string;
  paused: boolean;
  nextRun: string | null;
  lastRun: string | null;
  lastResult?: { callId?: string; jobId?: string; error?: string };
  createdAt: string;
}
export interface ScheduleList {
  schedules: Schedule[];
}

/** GET /v1/events/history: oldest first from `since`; `next` is the cursor of the following page. */
export interface HistoryPage {
  events: GatewayEvent[];
  next?: string;
}
