import type { TestGateway } from './gateway-harness.js';
import type { ReferenceDevice } from './reference-device.js';

/** Connect a reference device over `how` (MQTT with a client id of its own) and wait until the gateway has it ready. */
export async function joinDevice(t: TestGateway, d: ReferenceDevice, how: 'websocket' | 'mqtt', group = 'test'): Promise<ReferenceDevice> {
  const ready = t.nextEvent('device.ready', d.deviceId);
  if (how === 'websocket') await d.connectWebSocket(t.wsUrl);
  else await d.connectMqtt(t.mqttUrl, { clientId: `GID_${group}@@@${d.deviceId.replace(/:/g, '_')}@@@${d.clientId}` });
  await ready;
  return d;
}
