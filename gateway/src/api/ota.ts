import {
  DEVICE_PUBLISH_TOPIC,
  OtaRequestHeadersSchema,
  OtaSystemInfoSchema,
  deviceInboxTopic,
  describeIssues,
  formatMqttClientId,
  mintDeviceToken,
  mqttPassword,
  mqttUsername,
  type OtaResponse,
} from '@voxgate/protocol';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Config } from '../config.js';
import { GatewayError } from '../errors.js';
import type { FirmwareService } from '../firmware/service.js';

export interface OtaOptions {
  config: Config;
  deviceSecret: string;
  /** The MQTT port actually bound (it may be 0 in the configuration). */
  mqttPort: () => number;
  /** Picks each device's `firmware` section (rollouts, images in <dataDir>/firmware). */
  firmware: FirmwareService;
}

/**
 * `POST /xiaozhi/ota/`: where a xiaozhi device learns how to connect. It answers with a `websocket` or an
 * `mqtt` section (never both: the device prefers MQTT whenever that section exists), built from the
 * configured public addresses or, by default, the host the device used to reach us.
 */
export async function otaRoutes(app: FastifyInstance, o: OtaOptions): Promise<void> {
  const handler = async (req: FastifyRequest) => {
    const h = OtaRequestHeadersSchema.safeParse(req.headers);
    if (!h.success) throw new GatewayError('INVALID_REQUEST', `OTA request headers: ${describeIssues(h.error.issues)}`);
    const deviceId = h.data['device-id'];
    const clientId = h.data['client-id'];
    const info = OtaSystemInfoSchema.safeParse(req.body ?? {});
    const version = info.success ? info.data.application?.version : undefined;
    req.log.info({ deviceId, clientId, version }, 'OTA check');

    const c = o.config;
    const base = publicBase(req, c);
    const out: OtaResponse = {
      server_time: { timestamp: Date.now(), timezone_offset: c.ota.timezoneOffsetMinutes },
      firmware: await o.firmware.offerFor({ deviceId, userAgent: h.data['user-agent'], body: req.body, base }),
    };
    if (c.ota.transport === 'mqtt' && c.mqtt.enabled) {
      const mqttClientId = formatMqttClientId(c.mqtt.group, deviceId, clientId.replace(/:/g, '_'));
      const username = mqttUsername({ ip: req.ip });
      out.mqtt = {
        endpoint: c.mqtt.publicEndpoint ?? `${base.hostname}:${o.mqttPort()}`,
        client_id: mqttClientId,
        username,
        password: mqttPassword(o.deviceSecret, mqttClientId, username),
        publish_topic: DEVICE_PUBLISH_TOPIC,
        subscribe_topic: deviceInboxTopic(deviceId),
      };
    } else {
      const ws = new URL(c.ws.path, base);
      ws.protocol = base.protocol === 'https:' ? 'wss:' : 'ws:';
      // Only hmac tokens can be minted here; a `token`-mode device keeps the token it was provisioned with.
      const token = c.deviceAuth === 'hmac' ? mintDeviceToken(o.deviceSecret, clientId, deviceId, Date.now() / 1000) : '';
      out.websocket = { url: ws.toString(), token };
    }
    return out;
  };
  const schema = { tags: ['ota'], summary: 'Device self-configuration (xiaozhi OTA check)', headers: { type: 'object', properties: { 'device-id': { type: 'string' }, 'client-id': { type: 'string' } }, required: ['device-id', 'client-id'] } };
  app.post('/xiaozhi/ota/', { schema, bodyLimit: 64 * 1024, handler });
  app.get('/xiaozhi/ota/', { schema, handler });
}

function publicBase(req: FastifyRequest, c: Config): URL {
  if (c.http.publicUrl) return new URL(c.http.publicUrl);
  const host = req.headers.host && /^[A-Za-z0-9.:[\]-]{1,255}$/.test(req.headers.host) ? req.headers.host : `localhost:${c.http.port}`;
  return new URL(`http://${host}`);
}
