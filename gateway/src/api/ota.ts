import {
  DEVICE_PUBLISH_TOPIC,
  OtaActivateBodySchema,
  OtaRequestHeadersSchema,
  OtaSystemInfoSchema,
  deviceInboxTopic,
  describeIssues,
  formatMqttClientId,
  mintDeviceToken,
  mqttPassword,
  mqttUsername,
  type OtaActivationSection,
  type OtaMqttSection,
  type OtaResponse,
  type OtaWebsocketSection,
} from '@voxgate/protocol';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { EnrollmentConfig } from '../enrollment/config.js';
import type { OtaConfig } from '../firmware/config.js';
import type { DeviceAuthMode, MqttConfig, WsConfig } from '../links/config.js';
import type { TlsConfig } from '../tls/config.js';
import type { HttpConfig } from './config.js';
import type { OtaProof } from '../enrollment/credentials.js';
import type { Enrollment, OtaDecision } from '../enrollment/enrollment.js';
import type { DeviceTenants } from '../devices/tenants.js';
import { GatewayError } from '../errors.js';
import { deviceFacts } from '../firmware/rollout.js';
import type { FirmwareService } from '../firmware/service.js';
import type { Metrics } from '../metrics.js';
import { sourceKey } from '../throttle/source-key.js';
import { KeyedTokenBucket } from '../throttle/token-bucket.js';
import { ThrottledLog } from '../throttle/throttled-log.js';
import { publicBase } from './route-helpers.js';

/** The parts of the configuration an OTA answer is built from. */
export interface OtaSettings {
  http: Pick<HttpConfig, 'publicUrl' | 'port'>;
  ws: Pick<WsConfig, 'path'>;
  mqtt: Pick<MqttConfig, 'enabled' | 'publicEndpoint' | 'group'>;
  tls: Pick<TlsConfig, 'advertise' | 'mqttPort'>;
  ota: Pick<OtaConfig, 'transport' | 'timezoneOffsetMinutes'>;
  enrollment: Pick<EnrollmentConfig, 'rateLimit'>;
  deviceAuth: DeviceAuthMode;
}

export interface OtaOptions {
  settings: OtaSettings;
  deviceSecret: string;
  /** The MQTT port actually bound (it may be 0 in the configuration). */
  mqttPort: () => number;
  /** The MQTT-over-TLS port bound, when that listener is on. */
  mqttTlsPort: () => number | undefined;
  /** Picks each device's `firmware` section (rollouts, images in <dataDir>/firmware). */
  firmware: FirmwareService;
  metrics: Metrics;
  /** Who may receive minted credentials; absent when device auth is `open` (nothing to protect). */
  enrollment?: Enrollment | undefined;
  /** What the check said about the device: its board (board.type, else board.name, else the User-Agent's product) and firmware. */
  onReport?: (deviceId: string, facts: DeviceReport) => boolean;
  /** Devices' tenants: `enrollment.tenantRules` give a device without one its tenant here. */
  tenants?: Pick<DeviceTenants, 'assignByRules'> | undefined;
}

/** What an OTA check says about a device; `proven`: the asker presented the enrolled device's credentials. */
export interface DeviceReport {
  board: string | undefined;
  firmware: string | undefined;
  clientId: string;
  proven: boolean;
}

/** What the connection section may carry: the device's credentials, none (it keeps its own), or the unenrolled defaults. */
type CredentialSource = { kind: 'binding'; decision: OtaDecision & { kind: 'credentials' } } | { kind: 'none' } | { kind: 'legacy' };

/**
 * `POST /xiaozhi/ota/`: where a xiaozhi device learns how to connect. It answers with a `websocket` or an
 * `mqtt` section (never both: the device prefers MQTT whenever that section exists), built from the
 * configured public addresses or, by default, the host the device used to reach us. Credentials go only
 * to a device enrollment allows (see docs/security.md); a device waiting for approval gets an
 * `activation` section instead and polls `POST /xiaozhi/ota/activate`.
 */
export async function otaRoutes(app: FastifyInstance, o: OtaOptions): Promise<void> {
  const c = o.settings;
  const { perSecond, burst, maxAddresses } = c.enrollment.rateLimit;
  const limiter = new KeyedTokenBucket({ ratePerSecond: perSecond, burst }, { maxKeys: maxAddresses });
  const refusals = new ThrottledLog(app.log, 'warn', { linesPerWindow: 1, windowMs: 60_000, maxKeys: maxAddresses });
  // Before the body is read: a flood costs a map lookup per request.
  app.addHook('onRequest', async (req) => {
    const route = req.routeOptions.url === '/xiaozhi/ota/activate' ? 'activate' : 'ota';
    // Per source, as the connection limits count: one IPv6 subscriber holds a /64 and could name a fresh address
    // (a fresh bucket) for every request.
    const source = sourceKey(req.ip);
    const take = limiter.take(source);
    if (take.ok) return;
    o.metrics.rateLimited.inc({ route });
    refusals.write({ remote: req.ip, route }, 'OTA rate limit reached for this address', source);
    const { retryAfterSeconds } = take;
    throw new GatewayError('RATE_LIMITED', `too many OTA requests from this address; retry in ${retryAfterSeconds} s`, { retryAfterSeconds });
  });

  // Minted credentials need enrollment: hmac tokens, and MQTT passwords in every mode but open.
  const mints = (transport: 'websocket' | 'mqtt') => c.deviceAuth === 'hmac' || (c.deviceAuth === 'token' && transport === 'mqtt');

  const handler = async (req: FastifyRequest) => {
    const h = OtaRequestHeadersSchema.safeParse(req.headers);
    if (!h.success) throw new GatewayError('INVALID_REQUEST', `OTA request headers: ${describeIssues(h.error.issues)}`);
    const deviceId = h.data['device-id'];
    const clientId = h.data['client-id'];
    const base = publicBase(req, c.http);
    const info = OtaSystemInfoSchema.safeParse(req.body ?? {});
    const version = info.success ? info.data.application?.version : undefined;
    const board = info.success ? info.data.board?.type : undefined;
    req.log.info({ deviceId, clientId, version }, 'OTA check');

    const transport = c.ota.transport === 'mqtt' && c.mqtt.enabled ? 'mqtt' : 'websocket';
    const out: OtaResponse = {
      server_time: { timestamp: Date.now(), timezone_offset: c.ota.timezoneOffsetMinutes },
      firmware: await o.firmware.offerFor({ deviceId, userAgent: h.data['user-agent'], body: req.body, base }),
    };
    let credentials: CredentialSource = { kind: 'legacy' };
    if (o.enrollment && mints(transport)) {
      const decision = await o.enrollment.ota({
        deviceId,
        clientId,
        proof: otaProof(req.headers.authorization),
        remoteAddress: req.ip,
        userAgent: h.data['user-agent'],
        firmwareVersion: version,
        board,
      });
      if (decision.kind === 'activation') {
        out.activation = activationSection(decision.claim.code, decision.claim.challenge, decision.claim.expiresAt);
        return out;
      }
      credentials = decision.kind === 'credentials' ? { kind: 'binding', decision } : { kind: 'none' };
    }
    const speaksForDevice = recordReport(o, refusals, req, { deviceId, clientId, userAgent: h.data['user-agent'], proven: credentials.kind === 'binding' });
    if (speaksForDevice) o.firmware.rememberReport({ deviceId, userAgent: h.data['user-agent'], body: req.body });
    // A device without a tenant gets one from enrollment.tenantRules once it may connect: when enrollment
    // hands it credentials, or where nothing is enrolled. A pending device gets its tenant at approval. The rules
    // match the client id and board the check names: a check refused above (a known device, another client id)
    // would give the device to whichever tenant's rule the sender chose to match.
    if (o.tenants && credentials.kind !== 'none' && speaksForDevice) await o.tenants.assignByRules({ deviceId, clientId, board });
    if (transport === 'mqtt') out.mqtt = mqttSection(o, req, base, deviceId, clientId, credentials);
    else out.websocket = websocketSection(o, base, deviceId, clientId, credentials);
    return out;
  };
  const headers = { type: 'object', properties: { 'device-id': { type: 'string' }, 'client-id': { type: 'string' } }, required: ['device-id', 'client-id'] };
  const schema = { tags: ['ota'], summary: 'Device self-configuration (xiaozhi OTA check)', headers };
  app.post('/xiaozhi/ota/', { schema, bodyLimit: 64 * 1024, handler });
  app.get('/xiaozhi/ota/', { schema, handler });

  app.post('/xiaozhi/ota/activate', {
    schema: { tags: ['ota'], summary: 'Device activation poll: 202 while an operator has not approved, 200 once enrolled', headers },
    bodyLimit: 4 * 1024,
    handler: async (req: FastifyRequest, reply: FastifyReply) => {
      const h = OtaRequestHeadersSchema.safeParse(req.headers);
      if (!h.success) throw new GatewayError('INVALID_REQUEST', `activation headers: ${describeIssues(h.error.issues)}`);
      const body = OtaActivateBodySchema.safeParse(req.body ?? {});
      if (!body.success) throw new GatewayError('INVALID_REQUEST', `activation body: ${describeIssues(body.error.issues)}`);
      const state = o.enrollment ? o.enrollment.activate(h.data['device-id'], h.data['client-id'], body.data.challenge) : 'unknown';
      o.metrics.enrollments.inc({ outcome: `activate_${state}` });
      if (state === 'done') return reply.code(200).send({ status: 'activated' });
      if (state === 'pending') return reply.code(202).send({ status: 'pending' });
      if (state === 'rejected') throw new GatewayError('ENROLLMENT_REJECTED', 'an operator rejected this device');
      throw new GatewayError('ENROLLMENT_NOT_FOUND', 'no enrollment is pending for this device; ask /xiaozhi/ota/ first');
    },
  });
}

/**
 * What the check says about the device (its board and firmware, which fleet jobs' filters select on). Anyone can
 * name a device in a check without its credentials (the stock firmware presents none; where nothing is enrolled,
 * open or token device auth, there are none to present): such a report counts only when it names the client id the
 * device itself connects with (devices/records.ts `reported`). False when it did not count.
 */
function recordReport(
  o: OtaOptions,
  refusals: ThrottledLog,
  req: FastifyRequest,
  c: { deviceId: string; clientId: string; userAgent: string | undefined; proven: boolean },
): boolean {
  if (!o.onReport) return true;
  const facts = deviceFacts(c.userAgent, req.body);
  if (o.onReport(c.deviceId, { board: facts.boards[0], firmware: facts.version, clientId: c.clientId, proven: c.proven })) return true;
  o.metrics.enrollments.inc({ outcome: 'report_refused' });
  refusals.write(
    { deviceId: c.deviceId, clientId: c.clientId, remote: req.ip },
    'OTA report not recorded: no proof, and not the client id the device connects with',
    sourceKey(req.ip),
  );
  return false;
}

function activationSection(code: string, challenge: string, expiresAt: number): OtaActivationSection {
  return { code, message: `Voxgate enrollment code ${code}`, challenge, timeout_ms: Math.max(0, expiresAt - Date.now()) };
}

function websocketSection(o: OtaOptions, base: URL, deviceId: string, clientId: string, cred: CredentialSource): OtaWebsocketSection {
  const ws = new URL(o.settings.ws.path, base);
  const advertise = o.settings.tls.advertise;
  ws.protocol = advertise === 'tls' || (advertise === 'auto' && base.protocol === 'https:') ? 'wss:' : 'ws:';
  const url = ws.toString();
  if (cred.kind === 'binding') return { url, token: o.enrollment!.credentials.token(cred.decision.binding) };
  if (cred.kind === 'none') return { url };
  // Not minting (open or token device auth): an open device needs no token; a token device keeps its own.
  if (o.settings.deviceAuth === 'token') return { url };
  return { url, token: o.settings.deviceAuth === 'hmac' ? mintDeviceToken(o.deviceSecret, clientId, deviceId, Date.now() / 1000) : '' };
}

function mqttSection(o: OtaOptions, req: FastifyRequest, base: URL, deviceId: string, clientId: string, cred: CredentialSource): OtaMqttSection {
  const c = o.settings;
  const where = {
    endpoint: c.mqtt.publicEndpoint ?? `${base.hostname}:${advertisedMqttPort(o)}`,
    publish_topic: DEVICE_PUBLISH_TOPIC,
    subscribe_topic: deviceInboxTopic(deviceId),
  };
  if (cred.kind === 'none') return where;
  const username = mqttUsername({ ip: req.ip });
  if (cred.kind === 'binding') {
    const creds = o.enrollment!.credentials;
    const b = cred.decision.binding;
    return { ...where, client_id: creds.mqttClientId(b), username, password: creds.mqttPassword(b, username) };
  }
  const mqttClientId = formatMqttClientId(c.mqtt.group, deviceId, clientId.replace(/:/g, '_'));
  return { ...where, client_id: mqttClientId, username, password: mqttPassword(o.deviceSecret, mqttClientId, username) };
}

/**
 * The broker port devices are told: the TLS one when that listener is on (or `tls.advertise` is `tls`:
 * TLS terminated in front of us). The reference firmware turns TLS on exactly for port 8883.
 */
function advertisedMqttPort(o: OtaOptions): number {
  const { advertise, mqttPort } = o.settings.tls;
  const tlsPort = o.mqttTlsPort();
  if (advertise === 'tls') return tlsPort ?? mqttPort;
  if (advertise === 'auto' && tlsPort !== undefined) return tlsPort;
  return o.mqttPort();
}

/** `Bearer <token>` (WebSocket credentials) or `Basic <username:password>` (MQTT credentials). */
function otaProof(authorization: string | undefined): OtaProof {
  const m = /^(Bearer|Basic)\s+(\S{1,2048})\s*$/i.exec(authorization ?? '');
  if (!m) return {};
  if (m[1]!.toLowerCase() === 'bearer') return { bearer: m[2]! };
  const decoded = Buffer.from(m[2]!, 'base64').toString('utf8');
  const i = decoded.indexOf(':');
  return i < 0 ? {} : { basic: { username: decoded.slice(0, i), password: decoded.slice(i + 1) } };
}
