import type { FramesConfig } from '../links/config.js';
import type { SchemasConfig } from '../schemas/config.js';
import { GATEWAY_NAME, GATEWAY_VERSION } from '../version.js';
import { CatalogBudget } from './catalog-budget.js';
import type { CallsConfig, DevicesConfig, SessionConfig } from './config.js';
import { DeviceRegistry, type RegistryDeps } from './registry.js';
import { SourceReadBudgets } from './source-read-budgets.js';
import { ToolsPageCache } from './tools-page-cache.js';

export interface RegistrySettings {
  session: SessionConfig;
  calls: CallsConfig;
  devices: DevicesConfig;
  frames: FramesConfig;
  schemas: SchemasConfig;
  /** A connected device gets a fresh vision token this often (see vision/start.ts). */
  visionRefreshMs: number | undefined;
}

/** The registry of connected devices, each session set up from its slices of the configuration. */
export function createRegistry(d: Omit<RegistryDeps, 'settings' | 'maxKnownDevices' | 'pages'>, s: RegistrySettings): DeviceRegistry {
  return new DeviceRegistry({
    ...d,
    maxKnownDevices: s.devices.maxKnown,
    pages: new ToolsPageCache(),
    settings: {
      requestTimeoutMs: s.session.requestTimeoutMs,
      maxToolPages: s.session.maxToolPages,
      maxTools: s.session.maxTools,
      maxCatalogBytes: s.session.maxCatalogBytes,
      catalogs: new CatalogBudget(s.devices.catalogBudgetBytes, { log: d.log, metrics: d.metrics }),
      calls: { defaultTimeoutMs: s.calls.defaultTimeoutMs, maxTimeoutMs: s.calls.maxTimeoutMs },
      queueLimit: s.calls.queueLimit,
      concurrency: s.calls.concurrency,
      clientInfo: { name: GATEWAY_NAME, version: GATEWAY_VERSION },
      frameLimits: s.frames,
      unsolicitedFrames: { ratePerSecond: s.frames.devicePerSecond, burst: s.frames.deviceBurst },
      sourceFrames: new SourceReadBudgets({ ratePerSecond: s.frames.addressPerSecond, burst: s.frames.addressBurst }),
      schemaLimits: s.schemas,
      setupRetryMinMs: s.session.setupRetryMinMs,
      setupRetryMaxMs: s.session.setupRetryMaxMs,
      setupMaxErrors: s.session.setupMaxErrors,
      visionRefreshMs: s.visionRefreshMs,
    },
  });
}
