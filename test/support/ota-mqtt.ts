import type { TestGateway } from './gateway-harness.js';
import type { ReferenceDevice } from './reference-device.js';

interface OtaMqtt {
  mqtt?: { client_id: string; username: string; password: string; publish_topic: string };
}

/** Boot a reference device the firmware's way: ask the OTA endpoint for MQTT credentials, then CONNECT. */
export async function connectMqttViaOta(t: TestGateway, d: ReferenceDevice): Promise<void> {
  const res = await fetch(`${t.baseUrl}/xiaozhi/ota/`, {
    method: 'POST',
    headers: { 'device-id': d.deviceId, 'client-id': d.clientId, 'content-type': 'application/json' },
    body: JSON.stringify({ application: { version: d.firmwareVersion } }),
  });
  const c = ((await res.json()) as OtaMqtt).mqtt;
  if (!c) throw new Error(`OTA answered ${res.status} without an mqtt section (is ota.transport "mqtt"?)`);
  await d.connectMqtt(t.mqttUrl, { clientId: c.client_id, username: c.username, password: c.password, publishTopic: c.publish_topic });
}
