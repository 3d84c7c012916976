import type { InitializeResult } from '@voxgate/protocol';
import type { EventBus } from '../events/bus.js';
import type { ToolCatalog } from './catalog.js';
import type { ListedTools } from './setup.js';

/** The events a device's setup publishes (README's event table): functions of the session's bus and device, no object per session. */
export interface DeviceEventsSource {
  readonly bus: EventBus;
  readonly deviceId: string;
}

export function publishReady(s: DeviceEventsSource, initialize: InitializeResult, catalog: ToolCatalog): void {
  s.bus.publish('device.ready', s.deviceId, {
    toolCount: catalog.size,
    hash: catalog.hash,
    server: initialize.serverInfo,
    protocolVersion: initialize.protocolVersion,
  });
}

/** The device refused a tools/list page for good: ready with the tools before it. */
export function publishCatalogIncomplete(s: DeviceEventsSource, { catalog, gap }: ListedTools): void {
  if (!gap) return;
  const { warning, page, after, error } = gap;
  s.bus.publish('device.catalog_incomplete', s.deviceId, { warning, page, after: after ?? null, error, toolCount: catalog.size });
}

export function publishToolsChanged(s: DeviceEventsSource, catalog: ToolCatalog, previousHash: string, reason: string): void {
  s.bus.publish('device.tools_changed', s.deviceId, { hash: catalog.hash, previousHash, toolCount: catalog.size, reason });
}
