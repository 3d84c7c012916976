/**
 * What a device session (session.ts) is made from: what is the device's own, what every session of a gateway
 * shares, and what it asks of its holder (the registry).
 */
import type { VisionCapability } from '@voxgate/protocol';
import type { Logger } from 'pino';
import type { EventBus } from '../events/bus.js';
import type { Metrics } from '../metrics.js';
import type { SchemaValidators } from '../schemas/validators.js';
import type { KeyedTokenBucket, RateLimit } from '../throttle/token-bucket.js';
import type { BadInputBudget } from './bad-input-log.js';
import type { DeviceLink } from './link.js';
import type { DeviceSession } from './session.js';
import type { SessionSettings } from './settings.js';
import type { ToolsPageCache } from './tools-page-cache.js';
import type { VoiceHook } from './voice-hook.js';

/** What is the device's own. */
export interface SessionDevice {
  deviceId: string;
  clientId: string;
  link: DeviceLink;
  /** The registry's connection counter, in the session's log lines. */
  epoch?: number;
}

/**
 * What every session of a gateway shares: the registry makes one object for all of its sessions, and each
 * session keeps a reference to it (one field, not eight: ~56 B per device).
 */
export interface SessionShared {
  /** The parent logger: the session's own (bound to its device id, transport and epoch) is made when it first logs. */
  log: Logger;
  bus: EventBus;
  metrics: Metrics;
  settings: SessionSettings;
  /** This gateway's tools/list page cache, shared by its sessions. */
  pages: ToolsPageCache;
  /** Compiled argument validators, shared by schema content. */
  validators: SchemaValidators;
  /** Who holds the session (the registry): one object for every session, so no closures per device. */
  host: SessionHost;
  /** Answers hellos and carries voice sessions: the voice relay, or the no-voice hook (devices/no-voice-hook.ts). */
  voice: VoiceHook;
  /** Hellos after a connection's first, per device (HELLO_RATE): each one costs answers, a voice session, a log line. */
  hellos: KeyedTokenBucket;
  /** Bad-input lines of all sessions together (a new connection is a new session, with a budget of its own). */
  badInputLines: BadInputBudget;
}

/**
 * Hellos a device may send after its connection's first: a few at once, then one every two seconds. A real device
 * sends one per conversation (MQTT) or per connection (WebSocket); a red team's MQTT device sent 5 000 in 118 ms
 * and got 10 000 answers and 5 000 log lines.
 */
export const HELLO_RATE: RateLimit = { ratePerSecond: 0.5, burst: 5 };

/** What a session asks of its holder (the registry), told which device or session it is. */
export interface SessionHost {
  /** Minted per (re)initialize: the vision token expires. */
  vision(deviceId: string): VisionCapability | undefined;
  /** The catalog hash this device had before (a previous connection), to tell a changed catalog. */
  previousHash(session: DeviceSession): string | undefined;
  onReady(session: DeviceSession): void;
  onClosed(session: DeviceSession): void;
}
