import type { InitializeResult } from '@voxgate/protocol';
import type { EventBus } from '../events/bus.js';
import type { ToolCatalog } from './catalog.js';
import type { ListedTools } from './setup.js';

/** The events a device's setup publishes (README's event table). */
export class DeviceEvents {
  constructor(
    private readonly bus: EventBus,
    private readonly deviceId: string,
  ) {}

  ready(initialize: InitializeResult, catalog: ToolCatalog): void {
    this.bus.publish('device.ready', this.deviceId, {
      toolCount: catalog.size,
      hash: catalog.hash,
      server: initialize.serverInfo,
      protocolVersion: initialize.protocolVersion,
    });
  }

  /** The device refused a tools/list page for good: ready with the tools before it. */
  catalogIncomplete({ catalog, gap }: ListedTools): void {
    if (!gap) return;
    const { warning, page, after, error } = gap;
    this.bus.publish('device.catalog_incomplete', this.deviceId, { warning, page, after: after ?? null, error, toolCount: catalog.size });
  }

  toolsChanged(catalog: ToolCatalog, previousHash: string, reason: string): void {
    this.bus.publish('device.tools_changed', this.deviceId, { hash: catalog.hash, previousHash, toolCount: catalog.size, reason });
  }
}
