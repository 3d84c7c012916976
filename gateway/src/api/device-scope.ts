import { normalizeDeviceId } from '@voxgate/protocol';
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type { DeviceDirectory } from '../devices/directory.js';
import { scopedDirectory } from '../devices/scoped-directory.js';
import { deviceVisible, type DeviceTenancy } from '../devices/tenants.js';
import { GatewayError } from '../errors.js';
import type { GatewayEvent } from '../events/bus.js';
import { parseDeviceId } from './route-helpers.js';

/**
 * Device routes see devices through the caller's tenant (principal.ts canSee): an operator key (no tenant)
 * sees every device, a tenant's key only its tenant's. Another tenant's device is answered as one that
 * never connected (404 DEVICE_NOT_FOUND), never 403: a tenant learns nothing of the others' devices.
 */

/** Nobody has a tenant: what routes see when no tenancy is wired (only operator keys see devices). */
export const NO_TENANTS: DeviceTenancy = { tenantOf: () => undefined };

/** Whether this request's caller may see the device. */
export function callerSees(req: FastifyRequest, tenancy: DeviceTenancy, deviceId: string): boolean {
  return deviceVisible(tenancy, req.caller ?? {}, deviceId);
}

/** The device id of a path parameter, when the caller may see that device; 400 when malformed, 404 when not its own. */
export function visibleDeviceId(req: FastifyRequest, tenancy: DeviceTenancy, raw: string): string {
  const id = parseDeviceId(raw);
  if (!callerSees(req, tenancy, id)) throw new GatewayError('DEVICE_NOT_FOUND', `no device ${id} has ever connected`);
  return id;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route reads its device through `callerDirectory` first thing, which answers the same 404: no scope hook. */
    scopesItsDevice?: boolean;
  }
}

/**
 * Every route under `/v1/devices/{deviceId}` of the plugin that calls this, whoever registers it (photos,
 * firmware, queued calls, ...), answers 404 for a device the caller may not see, before its handler runs. The hook
 * is put on those routes only (other routes run no hook for it), and not on a route that scopes its device itself.
 */
export function scopeDeviceRoutes(app: FastifyInstance, tenancy: DeviceTenancy): void {
  // A callback hook (no promise per request): it runs for every device request, and mostly has nothing to do.
  const scope = (req: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction) => {
    if (req.caller?.tenant === undefined) return done();
    const raw = (req.params as { deviceId?: unknown }).deviceId;
    const id = typeof raw === 'string' ? normalizeDeviceId(raw) : undefined;
    // A malformed id is the route's own 400; an id of another tenant's device is not there.
    if (id !== undefined && !callerSees(req, tenancy, id)) return done(new GatewayError('DEVICE_NOT_FOUND', `no device ${id} has ever connected`));
    done();
  };
  app.addHook('onRoute', (route) => {
    if (!route.url.startsWith('/v1/devices/:deviceId') || route.config?.scopesItsDevice === true) return;
    const own = route.preHandler === undefined ? [] : Array.isArray(route.preHandler) ? route.preHandler : [route.preHandler];
    route.preHandler = [scope, ...own];
  });
}

/** Which events a tenant's key sees (the stream, its replay, the history's pages): see `eventVisibility`. */
export interface EventVisibility {
  /** The caller's tenant: only events published under it (GatewayEvent.tenant) are its. */
  tenant: string;
  /** Whether the caller may see the device now: a device moved to another tenant is not its (404), nor its events. */
  seesDevice(deviceId: string): boolean;
  /** Both: the event was published under the caller's tenant, and its device is still the caller's tenant's. */
  sees(e: Pick<GatewayEvent, 'deviceId' | 'tenant'>): boolean;
}

/**
 * What this request's caller sees of the events: undefined for an operator (every event). A tenant's key sees an event
 * only if it was published under that tenant (its device's tenant then; GatewayEvent.tenant) while the device is still
 * that tenant's: a device moved from one tenant to another takes none of its past to the new one (what its old owner's
 * people said to it, the old owner's calls), and leaves none of it readable by the old one. Events without a tenant
 * (devices without one, fleet-wide events, rows older than the tenant column) are operators' only.
 */
export function eventVisibility(req: FastifyRequest, tenancy: DeviceTenancy): EventVisibility | undefined {
  const tenant = req.caller?.tenant;
  if (tenant === undefined) return undefined;
  const seesDevice = (deviceId: string) => callerSees(req, tenancy, deviceId);
  return { tenant, seesDevice, sees: (e) => e.tenant === tenant && seesDevice(e.deviceId) };
}

/** The directory as this request's caller sees it. */
export function callerDirectory(req: FastifyRequest, dir: DeviceDirectory, tenancy: DeviceTenancy): DeviceDirectory {
  const caller = req.caller ?? {};
  const tenant = caller.tenant;
  if (tenant === undefined) return dir;
  // A tenant's pages read its own devices (the tenancy's index), not the fleet filtered.
  const devicesOf = tenancy.devicesOf?.bind(tenancy);
  const own = devicesOf && (() => devicesOf(tenant));
  return scopedDirectory(dir, (id) => deviceVisible(tenancy, caller, id), own);
}

/**
 * Routes that reach across devices (fleet jobs, schedules) are for operator keys: a tenant's key gets 403,
 * since what they select or name is not limited to its own devices.
 */
export function operatorOnly(app: FastifyInstance, what: string): void {
  app.addHook('onRequest', async (req) => {
    if (req.caller?.tenant !== undefined) throw new GatewayError('FORBIDDEN', `${what} are for operator keys (an API key without a tenant)`);
  });
}
