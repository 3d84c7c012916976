/**
 * A TypeScript stand-in for a device running the reference xiaozhi-esp32 firmware (78/xiaozhi-esp32,
 * main/mcp_server.cc, main/application.cc, main/protocols/*), for the gateway's tests.
 *
 * It reproduces the firmware's behaviour, quirks included, and shares no code with the gateway:
 *
 * - Frames are read the way cJSON reads them (./cjson.ts): case-insensitive keys, the first of duplicate
 *   keys wins, trailing garbage accepted, `valueint` saturating/truncating.
 * - MCP replies are built by string concatenation. Error messages, the tool-name cursor and the envelope's
 *   session id are pasted in unescaped, so a `"` in them produces invalid JSON. Errors have no `code`.
 * - One "main task" (Application::Schedule) runs everything in FIFO order: tool callbacks AND every
 *   outgoing MCP message (Application::SendMcpMessage schedules the send). So while a tool runs, nothing
 *   else is sent, not even an initialize/tools/list reply or a validation error; those go out after it,
 *   in scheduling order. Opening the channel (waiting up to 10 s for the server hello) also runs on the main
 *   task, so replies to requests that arrive before the server hello wait for it.
 * - MQTT OpenAudioChannel blocks the main task until a server hello with transport "udp" and a complete
 *   udp block arrives, or 10 s pass (then an error alert); nothing else (a goodbye, a refused hello) ends
 *   the wait. After the hello, the UDP connect resolves the server name: an empty name fails at once,
 *   and the device goes back to idle quietly.
 * - A WebSocket server hello without `transport` crashes the device (NULL dereference in ParseServerHello),
 *   as does a `tts` frame without a string `state`; a crash or reboot drops the connection, forgets the
 *   vision URL and the session id, and discards pending main-task work.
 * - `self.reboot` never gets its reply out: the reboot job it schedules sits ahead of the reply on the
 *   main task; 1 s later the device drops the connection.
 *
 * Test-only affordances (not firmware behaviour): holdReplies/releaseReplies, sendRaw, sendMcp/notify
 * (sent at once, not through the main task), and the recording arrays.
 */
import { randomUUID } from 'node:crypto';
import { WebSocket, type RawData } from 'ws';
import { connect as mqttConnect, type IClientOptions, type MqttClient } from 'mqtt';
import { cjsonParse, getItem, toCInt, toPlain, type CJson } from './cjson.js';
import { deferred, delay, type Deferred } from './wait.js';

export type PropType = 'boolean' | 'integer' | 'string';
export interface RefProperty {
  type: PropType;
  default?: boolean | number | string;
  minimum?: number;
  maximum?: number;
}
export type RefReturn = boolean | number | string | Record<string, unknown>;
export interface RefTool {
  name: string;
  description: string;
  properties?: Record<string, RefProperty>;
  userOnly?: boolean;
  /** MCP annotations the tool declares (e.g. `destructiveHint`), as a firmware could. */
  annotations?: Record<string, unknown>;
  /**
   * Throwing an Error makes the device reply {"error":{"message":<err.message>}} with NO code and the message
   * NOT escaped (raw text pasted into JSON), exactly like the firmware.
   */
  run(args: Record<string, boolean | number | string>, device: ReferenceDevice): RefReturn | Promise<RefReturn>;
}
export interface ReferenceDeviceOptions {
  deviceId: string;
  clientId?: string;
  boardName?: string;
  firmwareVersion?: string;
  tools?: RefTool[];
  extraTools?: number;
  pageBudget?: number;
  /** `features` of the device hello (both transports). Default {"mcp":true}. */
  helloFeatures?: Record<string, unknown>;
  /**
   * `self.camera.take_photo` posts this JPEG to the vision URL exactly as the firmware's Explain does
   * (multipart, boundary ----ESP32_CAMERA_BOUNDARY, Device-Id/Client-Id/Bearer token) and returns the body.
   * Unset: the photo tool answers a canned vision reply without any HTTP.
   */
  cameraJpeg?: Buffer;
}
export interface CloseInfo {
  code: number;
  reason: string;
}
export interface WebSocketConnectOptions {
  token?: string;
  useQuery?: boolean;
  headers?: Record<string, string>;
  helloTimeoutMs?: number;
  skipHello?: boolean;
  /** The `websocket.version` setting: binary protocol 1 (default), 2 or 3 (header and hello `version`). */
  protocolVersion?: 1 | 2 | 3;
  /** CA certificates to trust for a wss:// URL (the device's bundled root). */
  ca?: Buffer | string;
  /** The local address to connect from (another loopback address: another source for the gateway's per-address bounds). */
  localAddress?: string;
}
export interface MqttConnectOptions {
  clientId: string;
  username?: string;
  password?: string;
  keepalive?: number;
  sendHello?: boolean;
  /** How long the main task waits for the server hello after sendHello (firmware: 10000). */
  helloTimeoutMs?: number;
  /** Where the device publishes (the OTA `mqtt.publish_topic`). Default 'device-server'. */
  publishTopic?: string;
  /** CA certificates to trust for an mqtts:// URL. */
  ca?: Buffer | string;
}
export interface UdpParams {
  server: string;
  port: number;
  key: string;
  nonce: string;
}

const DEFAULT_PAGE_BUDGET = 8000;
const HELLO_TIMEOUT_MS = 10_000;
const AUDIO_PARAMS = { format: 'opus', sample_rate: 16000, channels: 1, frame_duration: 60 } as const;

/** A firmware crash (NULL dereference, uncaught exception): the device reboots. */
class DeviceCrash extends Error {}

interface Link {
  readonly transport: 'websocket' | 'mqtt';
  isOpen(): boolean;
  sendText(text: string): void;
  sendRaw(data: string | Buffer, opts: { binary?: boolean; topic?: string }): void;
  readonly closedInfo: Deferred<CloseInfo>;
  close(): Promise<void>;
  terminate(): void;
  /** Stop (or go on) reading the socket: what the gateway sends then waits in its buffers and the kernel's. */
  pauseReading(paused: boolean): void;
}

interface Job {
  run: () => unknown;
  /** Called instead of run when a reboot discards the job. */
  onDrop?: () => void;
}

/** Application::Schedule + MainEventLoop: one task, jobs run one at a time in FIFO order. */
class MainTask {
  generation = 0;
  private queue: Job[] = [];
  private running = false;

  constructor(private readonly onError: (err: unknown) => void) {}

  schedule(run: () => unknown, onDrop?: () => void): void {
    this.queue.push(onDrop ? { run, onDrop } : { run });
    if (!this.running) void this.pump(this.generation);
  }

  get busy(): boolean {
    return this.running;
  }

  private async pump(gen: number): Promise<void> {
    this.running = true;
    try {
      while (this.queue.length > 0) {
        const job = this.queue.shift()!;
        try {
          await job.run();
        } catch (err) {
          this.onError(err);
        }
        if (gen !== this.generation) return;
      }
    } finally {
      if (gen === this.generation) this.running = false;
    }
  }

  /** esp_restart(): forget queued work; a job still running finishes but its generation is stale. */
  reset(): void {
    this.generation++;
    const dropped = this.queue;
    this.queue = [];
    this.running = false;
    for (const j of dropped) j.onDrop?.();
  }
}

interface Waiter<T> {
  pred: (v: T) => boolean;
  resolve: (v: T) => void;
}

/** The firmware's McpTool::to_json (property order, no property descriptions, required only when non-empty). */
export function toolJson(tool: RefTool): string {
  const properties: Record<string, Record<string, unknown>> = {};
  const required: string[] = [];
  for (const [name, p] of Object.entries(tool.properties ?? {})) {
    const schema: Record<string, unknown> = { type: p.type };
    if (p.default !== undefined) schema['default'] = p.type === 'integer' && typeof p.default === 'number' ? toCInt(p.default) : p.default;
    if (p.type === 'integer') {
      if (p.minimum !== undefined) schema['minimum'] = toCInt(p.minimum);
      if (p.maximum !== undefined) schema['maximum'] = toCInt(p.maximum);
    }
    properties[name] = schema;
    if (p.default === undefined) required.push(name);
  }
  const inputSchema: Record<string, unknown> = { type: 'object', properties };
  if (required.length > 0) inputSchema['required'] = required;
  const json: Record<string, unknown> = { name: tool.name, description: tool.description, inputSchema };
  if (tool.userOnly || tool.annotations) json['annotations'] = { ...(tool.userOnly ? { audience: ['user'] } : {}), ...tool.annotations };
  return JSON.stringify(json);
}

function byteLength(s: string): number {
  return Buffer.byteLength(s, 'utf8');
}

/** McpTool::Call: one text item; bool -> "true"/"false", int -> decimal, object -> unformatted JSON. */
function callResultJson(ret: RefReturn): string {
  let text: string;
  if (typeof ret === 'string') text = ret;
  else if (typeof ret === 'boolean') text = ret ? 'true' : 'false';
  else if (typeof ret === 'number') text = String(toCInt(ret));
  else text = JSON.stringify(ret) ?? String(ret);
  return JSON.stringify({ content: [{ type: 'text', text }], isError: false });
}

export class ReferenceDevice {
  readonly deviceId: string;
  readonly clientId: string;
  /** Every JSON frame received from the gateway, as the device parsed it (cJSON), in order. */
  readonly received: Array<Record<string, unknown>> = [];
  /** MCP payloads received (the `payload` of type:"mcp" frames). */
  readonly mcpReceived: Array<Record<string, unknown>> = [];
  /** Every text frame / MQTT payload received, raw, including ones that do not parse. */
  readonly rawReceived: string[] = [];
  /** MQTT only: the topic of each PUBLISH received, in order. */
  readonly receivedTopics: string[] = [];
  /** Every text frame / MQTT payload the device sent, raw. */
  readonly sent: string[] = [];
  /** The firmware's ESP_LOG lines (drops and errors), e.g. "MCP: Invalid id for method: tools/list". */
  readonly log: string[] = [];
  /** Why the device crashed, one entry per crash. */
  readonly crashes: string[] = [];
  /** Binary (audio) frames received over WebSocket. */
  audioFramesReceived = 0;
  /** The binary frames themselves, in order (test affordance). */
  readonly audioReceived: Buffer[] = [];
  /** When each binary frame arrived (performance.now()), for pacing checks. */
  readonly audioReceivedAt: number[] = [];
  rebootCount = 0;
  /** Restarts so far (reboots and crashes). */
  get restarts(): number {
    return this.rebootCount + this.crashes.length;
  }

  vision?: { url: string; token?: string };
  sessionId = '';
  tools: RefTool[];
  volume = 50;
  brightness = 80;
  /** MQTT: the `udp` block of the accepted server hello (cleared by goodbye / a new hello). */
  udp?: UdpParams;
  /** MQTT: the UDP audio channel is open (a server hello was accepted and its UDP host resolved). */
  audioChannelOpen = false;
  /** MQTT: why the last OpenAudioChannel returned false, if it did. */
  lastAudioChannelFailure?: 'server_hello_timeout' | 'udp_connect' | undefined;
  /** Protocol::SetError calls (each shows an error alert on the device), e.g. SERVER_TIMEOUT. */
  readonly networkErrors: string[] = [];
  /** audio_params.sample_rate / frame_duration of the last accepted server hello. */
  serverSampleRate = 24000;
  serverFrameDuration = 60;

  readonly boardName: string;
  readonly firmwareVersion: string;
  readonly cameraJpeg: Buffer | undefined;
  private readonly pageBudget: number;
  private readonly helloFeatures: Record<string, unknown>;
  private readonly main: MainTask;
  private link?: Link;
  private lastClose: CloseInfo = { code: 0, reason: '' };
  private publishTopic = 'device-server';
  private helloWaiter?: { link: Link; d: Deferred<void> };
  private held?: string[];
  private readonly frameWaiters: Array<Waiter<Record<string, unknown>>> = [];
  private readonly mcpWaiters: Array<Waiter<Record<string, unknown>>> = [];

  constructor(opts: ReferenceDeviceOptions) {
    this.deviceId = opts.deviceId;
    this.clientId = opts.clientId ?? randomUUID();
    this.boardName = opts.boardName ?? 'sim-board';
    this.firmwareVersion = opts.firmwareVersion ?? '1.7.6';
    this.pageBudget = opts.pageBudget ?? DEFAULT_PAGE_BUDGET;
    this.cameraJpeg = opts.cameraJpeg;
    this.helloFeatures = opts.helloFeatures ?? { mcp: true };
    this.main = new MainTask((err) => this.logLine('Application', `main task job failed: ${String(err)}`));

    const extra = syntheticTools(opts.extraTools ?? 0);
    let tools: RefTool[];
    if (opts.tools) {
      tools = [...opts.tools, ...extra];
    } else {
      // firmware order: common tools, then board tools, then user-only tools (AddUserOnlyTools runs last)
      const ref = referenceTools();
      tools = [...ref.filter((t) => !t.userOnly), ...extra, ...ref.filter((t) => t.userOnly)];
    }
    // McpServer::AddTool ignores a second tool with the same name
    const seen = new Set<string>();
    this.tools = tools.filter((t) => (seen.has(t.name) ? false : (seen.add(t.name), true)));
  }

  get transport(): 'websocket' | 'mqtt' | undefined {
    return this.link?.transport;
  }

  get connected(): boolean {
    return this.link?.isOpen() ?? false;
  }

  /** Replies to tools/call currently held by holdReplies(). */
  get heldReplies(): number {
    return this.held?.length ?? 0;
  }

  // ---------------------------------------------------------------- WebSocket (websocket_protocol.cc)

  connectWebSocket(url: string, opts: WebSocketConnectOptions = {}): Promise<void> {
    const done = deferred<void>();
    // OpenAudioChannel runs on the main task and blocks it until the server hello (or the timeout)
    this.main.schedule(
      async () => {
        try {
          await this.openWebSocket(url, opts);
          done.resolve();
        } catch (e) {
          done.reject(e);
        }
      },
      () => done.reject(new Error('device rebooted before connecting')),
    );
    return done.promise;
  }

  private async openWebSocket(url: string, opts: WebSocketConnectOptions): Promise<void> {
    this.link?.terminate(); // delete websocket_
    const target = new URL(url);
    const headers: Record<string, string> = {};
    let auth: string | undefined;
    if (opts.token) auth = opts.token.includes(' ') ? opts.token : `Bearer ${opts.token}`;
    if (opts.useQuery) {
      target.searchParams.set('device-id', this.deviceId);
      target.searchParams.set('client-id', this.clientId);
      if (auth !== undefined) target.searchParams.set('authorization', auth);
    } else {
      if (auth !== undefined) headers['Authorization'] = auth;
      headers['Device-Id'] = this.deviceId;
      headers['Client-Id'] = this.clientId;
    }
    const version = opts.protocolVersion ?? 1;
    headers['Protocol-Version'] = String(version);
    Object.assign(headers, opts.headers);

    const link = await this.openWsLink(target.toString(), headers, opts);
    if (opts.skipHello) return;
    const hello = JSON.stringify({
      type: 'hello',
      version,
      features: this.helloFeatures,
      transport: 'websocket',
      audio_params: AUDIO_PARAMS,
    });
    await this.sendHelloAndWait(link, hello, opts.helloTimeoutMs ?? HELLO_TIMEOUT_MS);
  }

  private openWsLink(url: string, headers: Record<string, string>, { ca, localAddress }: WebSocketConnectOptions): Promise<Link> {
    const ws = new WebSocket(url, {
      headers,
      perMessageDeflate: false,
      ...(ca !== undefined ? { ca } : {}),
      ...(localAddress !== undefined ? { localAddress } : {}),
    });
    const closedInfo = deferred<CloseInfo>();
    const link: Link = {
      transport: 'websocket',
      isOpen: () => ws.readyState === WebSocket.OPEN,
      sendText: (t) => ws.send(t),
      sendRaw: (d, o) => ws.send(d, { binary: o.binary ?? false }),
      closedInfo,
      close: async () => {
        if (ws.readyState === WebSocket.CLOSED) return;
        if (ws.readyState === WebSocket.CONNECTING) ws.terminate();
        else ws.close(1000);
        await closedInfo.promise;
      },
      terminate: () => ws.terminate(),
      pauseReading: (paused) => (paused ? ws.pause() : ws.resume()),
    };
    this.link = link;
    ws.on('message', (data: RawData, isBinary: boolean) => {
      if (this.link !== link) return;
      if (isBinary) {
        this.audioFramesReceived++;
        this.audioReceivedAt.push(performance.now());
        this.audioReceived.push(Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data));
        return;
      }
      this.guard(() => this.onWebSocketText(rawToString(data)));
    });
    ws.on('close', (code: number, reason: Buffer) => {
      const info = { code, reason: reason.toString() };
      this.lastClose = info;
      closedInfo.resolve(info);
      if (this.link === link) this.logLine('WS', 'Websocket disconnected');
    });
    ws.on('error', (err: Error) => this.logLine('WS', `error: ${err.message}`));
    return new Promise<Link>((resolve, reject) => {
      ws.once('open', () => resolve(link));
      ws.once('unexpected-response', (_req, res) => {
        const status = res.statusCode ?? 0;
        const err = Object.assign(new Error(`Unexpected server response: ${status}`), { statusCode: status });
        res.resume();
        reject(err);
        ws.terminate();
      });
      ws.once('error', reject);
      ws.once('close', (code: number) => reject(Object.assign(new Error(`closed before open (${code})`), { code })));
    });
  }

  /** WebsocketProtocol OnData, text branch. */
  private onWebSocketText(text: string): void {
    const root = this.record(text);
    const type = getItem(root, 'type');
    if (type?.kind !== 'string') {
      this.logLine('WS', `Missing message type, data: ${text}`);
      return;
    }
    if (type.value === 'hello') this.parseServerHelloWs(root!);
    else this.onIncomingJson(root!, type.value);
  }

  private parseServerHelloWs(root: CJson): void {
    const transport = getItem(root, 'transport');
    if (transport?.kind !== 'string') {
      throw new DeviceCrash('ParseServerHello: transport missing or not a string (NULL valuestring dereferenced)');
    }
    if (transport.value !== 'websocket') {
      this.logLine('WS', `Unsupported transport: ${transport.value}`);
      return;
    }
    this.acceptHelloCommon(root);
    this.helloWaiter?.d.resolve();
  }

  // ---------------------------------------------------------------- MQTT (mqtt_protocol.cc)

  async connectMqtt(url: string, opts: MqttConnectOptions): Promise<void> {
    this.link?.terminate();
    this.publishTopic = opts.publishTopic ?? 'device-server';
    const options: IClientOptions = {
      clientId: opts.clientId,
      protocolVersion: 4,
      clean: true,
      keepalive: opts.keepalive ?? 240,
      reconnectPeriod: 0,
      connectTimeout: 10_000,
    };
    if (opts.username !== undefined) options.username = opts.username;
    if (opts.password !== undefined) options.password = opts.password;
    if (opts.ca !== undefined) options.ca = opts.ca;
    const client: MqttClient = mqttConnect(url, options);
    const closedInfo = deferred<CloseInfo>();
    const topic = (): string => this.publishTopic;
    const link: Link = {
      transport: 'mqtt',
      isOpen: () => client.connected,
      sendText: (t) => {
        client.publish(topic(), t, { qos: 0 });
      },
      sendRaw: (d, o) => {
        client.publish(o.topic ?? topic(), d, { qos: 0 });
      },
      closedInfo,
      close: () =>
        new Promise<void>((resolve) => {
          if (closedInfo.settled) return resolve();
          client.end(false, {}, () => resolve());
        }),
      terminate: () => {
        client.end(true);
      },
      pauseReading: (paused) => (paused ? client.stream.pause() : client.stream.resume()),
    };
    this.link = link;
    client.on('message', (t: string, payload: Buffer) => {
      if (this.link !== link) return;
      this.guard(() => this.onMqttMessage(t, payload));
    });
    client.on('close', () => {
      const info = { code: 0, reason: '' };
      this.lastClose = info;
      closedInfo.resolve(info);
      if (this.link === link) this.logLine('MQTT', 'MQTT disconnected');
    });
    await new Promise<void>((resolve, reject) => {
      const onConnect = (): void => {
        cleanup();
        resolve();
      };
      const onError = (err: Error): void => {
        cleanup();
        client.end(true);
        reject(err);
      };
      const onClose = (): void => {
        cleanup();
        reject(new Error('MQTT connection closed before CONNACK'));
      };
      const cleanup = (): void => {
        client.off('connect', onConnect);
        client.off('error', onError);
        client.off('close', onClose);
        client.on('error', (err: Error) => this.logLine('MQTT', `error: ${err.message}`));
      };
      client.on('connect', onConnect);
      client.on('error', onError);
      client.on('close', onClose);
    });
    if (opts.sendHello) void this.openAudioChannel(opts.helloTimeoutMs);
  }

  /**
   * MQTT OpenAudioChannel: clear the session id, publish the hello, and block the main task until a valid
   * server hello (transport "udp" with a udp block) arrives or the timeout passes. Resolves true/false.
   */
  openAudioChannel(timeoutMs = HELLO_TIMEOUT_MS): Promise<boolean> {
    const done = deferred<boolean>();
    this.main.schedule(
      async () => {
        const link = this.link;
        if (!link || link.transport !== 'mqtt' || !link.isOpen()) return done.resolve(false);
        this.sessionId = '';
        const hello = JSON.stringify({
          type: 'hello',
          version: 3,
          transport: 'udp',
          features: this.helloFeatures,
          audio_params: AUDIO_PARAMS,
        });
        this.audioChannelOpen = false;
        try {
          await this.sendHelloAndWait(link, hello, timeoutMs);
        } catch (e) {
          this.logLine('MQTT', `Failed to receive server hello: ${String(e)}`);
          // SetError(SERVER_TIMEOUT): the device shows an error alert
          this.networkErrors.push('SERVER_TIMEOUT');
          this.lastAudioChannelFailure = 'server_hello_timeout';
          return done.resolve(false);
        }
        // EspUdp::Connect: gethostbyname fails at once for an empty (or unresolvable) host; OpenAudioChannel
        // then returns false without SetError, and the application goes back to idle without an alert.
        if (!resolvableHost(this.udp?.server ?? '')) {
          this.logLine('EspUdp', 'Failed to get host by name');
          this.logLine('MQTT', 'Failed to connect UDP audio channel');
          this.lastAudioChannelFailure = 'udp_connect';
          return done.resolve(false);
        }
        this.audioChannelOpen = true;
        this.lastAudioChannelFailure = undefined;
        done.resolve(true);
      },
      () => done.resolve(false),
    );
    return done.promise;
  }

  private onMqttMessage(topic: string, payload: Buffer): void {
    this.receivedTopics.push(topic);
    const text = payload.toString('utf8');
    const root = this.record(text);
    if (!root) {
      this.logLine('MQTT', `Failed to parse json message ${text}`);
      return;
    }
    const type = getItem(root, 'type');
    if (type?.kind !== 'string') {
      this.logLine('MQTT', 'Message type is invalid');
      return;
    }
    if (type.value === 'hello') {
      this.parseServerHelloMqtt(root);
    } else if (type.value === 'goodbye') {
      const sid = getItem(root, 'session_id');
      if (sid !== undefined && sid.kind !== 'string') {
        throw new DeviceCrash('goodbye: session_id is not a string (NULL valuestring compared)');
      }
      if (sid === undefined || sid.value === this.sessionId) {
        // CloseAudioChannel on the main task; a server goodbye gets no goodbye back
        this.main.schedule(() => {
          this.udp = undefined;
          this.audioChannelOpen = false;
          this.logLine('MQTT', 'audio channel closed by server goodbye');
        });
      } else {
        this.logLine('MQTT', `goodbye for another session ignored: ${sid.value}`);
      }
    } else {
      this.onIncomingJson(root, type.value);
    }
  }

  /**
   * MqttProtocol::ParseServerHello: only a hello with transport "udp" and a complete udp block (string
   * server, port 1..65535, 16-byte hex key and nonce) ends OpenAudioChannel's wait; anything else is
   * logged and ignored, and the main task keeps waiting for the full 10 s.
   */
  private parseServerHelloMqtt(root: CJson): void {
    const transport = getItem(root, 'transport');
    if (transport?.kind !== 'string' || transport.value !== 'udp') {
      this.logLine('MQTT', 'Unsupported or missing transport');
      return;
    }
    this.acceptHelloCommon(root);
    const udp = getItem(root, 'udp');
    if (udp?.kind !== 'object') {
      this.logLine('MQTT', 'UDP is not specified');
      return;
    }
    const server = getItem(udp, 'server');
    const port = getItem(udp, 'port');
    const key = getItem(udp, 'key');
    const nonce = getItem(udp, 'nonce');
    if (
      server?.kind !== 'string' ||
      port?.kind !== 'number' ||
      port.valueint <= 0 ||
      port.valueint > 65535 ||
      key?.kind !== 'string' ||
      nonce?.kind !== 'string'
    ) {
      this.logLine('MQTT', 'Invalid UDP server, port, key, or nonce');
      return;
    }
    if (decodeHex16(key.value) === undefined || decodeHex16(nonce.value) === undefined) {
      this.logLine('MQTT', 'Invalid AES key or nonce length');
      return;
    }
    this.udp = { server: server.value, port: port.valueint, key: key.value, nonce: nonce.value };
    this.helloWaiter?.d.resolve();
  }

  // ---------------------------------------------------------------- shared protocol plumbing

  private acceptHelloCommon(root: CJson): void {
    const sid = getItem(root, 'session_id');
    if (sid?.kind === 'string') this.sessionId = sid.value;
    const ap = getItem(root, 'audio_params');
    if (ap?.kind === 'object') {
      const sr = getItem(ap, 'sample_rate');
      if (sr?.kind === 'number') this.serverSampleRate = sr.valueint;
      const fd = getItem(ap, 'frame_duration');
      if (fd?.kind === 'number') this.serverFrameDuration = fd.valueint;
    }
  }

  private async sendHelloAndWait(link: Link, hello: string, timeoutMs: number): Promise<void> {
    const d = deferred<void>();
    this.helloWaiter = { link, d };
    try {
      this.sendText(hello);
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`Failed to receive server hello within ${timeoutMs} ms`)), timeoutMs);
        d.promise.then(
          () => {
            clearTimeout(timer);
            resolve();
          },
          (e: unknown) => {
            clearTimeout(timer);
            reject(e);
          },
        );
        void link.closedInfo.promise.then((c) => {
          clearTimeout(timer);
          reject(Object.assign(new Error(`connection closed before the server hello (${c.code} ${c.reason})`), { code: c.code }));
        });
      });
    } finally {
      if (this.helloWaiter?.d === d) this.helloWaiter = undefined;
    }
  }

  /** Parse a received text as the device does and record it. */
  private record(text: string): CJson | undefined {
    this.rawReceived.push(text);
    const root = cjsonParse(text);
    if (root?.kind === 'object') {
      const frame = toPlain(root) as Record<string, unknown>;
      this.push(this.received, this.frameWaiters, frame);
    }
    return root;
  }

  /** Application::OnIncomingJson (type is already known to be a string). */
  private onIncomingJson(root: CJson, type: string): void {
    switch (type) {
      case 'tts': {
        const state = getItem(root, 'state');
        if (state?.kind !== 'string') throw new DeviceCrash('tts: state missing or not a string (strcmp on NULL)');
        return;
      }
      case 'stt':
      case 'llm':
      case 'alert':
        return;
      case 'mcp': {
        const payload = getItem(root, 'payload');
        if (payload?.kind === 'object') {
          this.push(this.mcpReceived, this.mcpWaiters, toPlain(payload) as Record<string, unknown>);
          this.parseMcp(payload);
        }
        return;
      }
      case 'system': {
        const command = getItem(root, 'command');
        if (command?.kind === 'string') {
          if (command.value === 'reboot') this.main.schedule(() => this.reboot('system command reboot'));
          else this.logLine('Application', `Unknown system command: ${command.value}`);
        }
        return;
      }
      default:
        this.logLine('Application', `Unknown message type: ${type}`);
    }
  }

  private guard(fn: () => void): void {
    try {
      fn();
    } catch (e) {
      if (e instanceof DeviceCrash) this.crash(e.message);
      else throw e;
    }
  }

  private crash(reason: string): void {
    this.logLine('panic', reason);
    this.crashes.push(reason);
    this.restart();
  }

  /** Application::Reboot (also what a crash ends in): drop the connection and restart with fresh RAM. */
  reboot(reason = 'reboot'): void {
    this.logLine('Application', `Rebooting... (${reason})`);
    this.rebootCount++;
    this.restart();
  }

  private restart(): void {
    const link = this.link;
    const waiter = this.helloWaiter;
    this.helloWaiter = undefined;
    this.sessionId = '';
    this.vision = undefined;
    this.udp = undefined;
    this.audioChannelOpen = false;
    this.held = undefined;
    waiter?.d.reject(new Error('device restarted'));
    this.main.reset();
    if (link) {
      if (link.transport === 'mqtt') void link.close();
      else link.terminate();
    }
  }

  private logLine(tag: string, msg: string): void {
    this.log.push(`${tag}: ${msg}`);
  }

  private sendText(text: string): boolean {
    const link = this.link;
    if (!link?.isOpen()) {
      this.logLine('Protocol', `not connected, dropped: ${text}`);
      return false;
    }
    this.sent.push(text);
    link.sendText(text);
    return true;
  }

  /** Protocol::SendMcpMessage: the envelope is concatenated, the session id unescaped. */
  private envelope(payload: string): string {
    return `{"session_id":"${this.sessionId}","type":"mcp","payload":${payload}}`;
  }

  /** Application::SendMcpMessage: the send is scheduled on the main task. */
  private sendMcpMessage(payload: string, toolReply: boolean): void {
    this.main.schedule(() => {
      if (toolReply && this.held) {
        this.held.push(payload);
        return;
      }
      this.sendText(this.envelope(payload));
    });
  }

  private replyResult(id: number, result: string, toolReply = false): void {
    this.sendMcpMessage(`{"jsonrpc":"2.0","id":${id},"result":${result}}`, toolReply);
  }

  private replyError(id: number, message: string, toolReply = false): void {
    this.sendMcpMessage(`{"jsonrpc":"2.0","id":${id},"error":{"message":"${message}"}}`, toolReply);
  }

  // ---------------------------------------------------------------- McpServer

  /** Schedule work on the device's main task (Application::Schedule); tools use it like the firmware does. */
  schedule(job: () => unknown): void {
    this.main.schedule(job);
  }

  private parseMcp(json: CJson): void {
    const version = getItem(json, 'jsonrpc');
    if (version?.kind !== 'string' || version.value !== '2.0') {
      this.logLine('MCP', `Invalid JSONRPC version: ${version?.kind === 'string' ? version.value : 'null'}`);
      return;
    }
    const method = getItem(json, 'method');
    if (method?.kind !== 'string') {
      this.logLine('MCP', 'Missing method');
      return;
    }
    const m = method.value;
    if (m.startsWith('notifications')) return;
    const params = getItem(json, 'params');
    if (params !== undefined && params.kind !== 'object') {
      this.logLine('MCP', `Invalid params for method: ${m}`);
      return;
    }
    const idNode = getItem(json, 'id');
    if (idNode?.kind !== 'number') {
      this.logLine('MCP', `Invalid id for method: ${m}`);
      return;
    }
    const id = idNode.valueint;

    if (m === 'initialize') {
      const caps = getItem(params, 'capabilities');
      if (caps?.kind === 'object') this.parseCapabilities(caps);
      this.replyResult(
        id,
        `{"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"${this.boardName}","version":"${this.firmwareVersion}"}}`,
      );
    } else if (m === 'tools/list') {
      let cursor = '';
      let withUser = false;
      const c = getItem(params, 'cursor');
      if (c?.kind === 'string') cursor = c.value;
      const w = getItem(params, 'withUserTools');
      if (w?.kind === 'bool') withUser = w.value;
      this.getToolsList(id, cursor, withUser);
    } else if (m === 'tools/call') {
      if (params?.kind !== 'object') {
        this.logLine('MCP', 'tools/call: Missing params');
        return this.replyError(id, 'Missing params', true);
      }
      const name = getItem(params, 'name');
      if (name?.kind !== 'string') {
        this.logLine('MCP', 'tools/call: Missing name');
        return this.replyError(id, 'Missing name', true);
      }
      const args = getItem(params, 'arguments');
      if (args !== undefined && args.kind !== 'object') {
        this.logLine('MCP', 'tools/call: Invalid arguments');
        return this.replyError(id, 'Invalid arguments', true);
      }
      this.doToolCall(id, name.value, args);
    } else {
      this.logLine('MCP', `Method not implemented: ${m}`);
      this.replyError(id, `Method not implemented: ${m}`);
    }
  }

  private parseCapabilities(caps: CJson): void {
    const vision = getItem(caps, 'vision');
    if (vision?.kind !== 'object') return;
    const url = getItem(vision, 'url');
    if (url?.kind !== 'string') return;
    const token = getItem(vision, 'token');
    this.vision = token?.kind === 'string' ? { url: url.value, token: token.value } : { url: url.value };
  }

  private getToolsList(id: number, cursor: string, withUser: boolean): void {
    let json = '{"tools":[';
    let found = cursor === '';
    let next = '';
    for (const tool of this.tools) {
      if (!found) {
        if (tool.name === cursor) found = true;
        else continue;
      }
      if (!withUser && tool.userOnly) continue;
      const tj = toolJson(tool) + ',';
      if (byteLength(json) + byteLength(tj) + 30 > this.pageBudget) {
        next = tool.name;
        break;
      }
      json += tj;
    }
    if (json.endsWith(',')) json = json.slice(0, -1);
    if (json.endsWith('[') && this.tools.length > 0) {
      this.logLine('MCP', `tools/list: Failed to add tool ${next} because of payload size limit`);
      this.replyError(id, `Failed to add tool ${next} because of payload size limit`);
      return;
    }
    json += next === '' ? ']}' : `],"nextCursor":"${next}"}`;
    this.replyResult(id, json);
  }

  private doToolCall(id: number, name: string, argsNode: CJson | undefined): void {
    const tool = this.tools.find((t) => t.name === name);
    if (!tool) {
      this.logLine('MCP', `tools/call: Unknown tool: ${name}`);
      return this.replyError(id, `Unknown tool: ${name}`, true);
    }
    const args: Record<string, boolean | number | string> = {};
    for (const [pname, prop] of Object.entries(tool.properties ?? {})) {
      const v = argsNode?.kind === 'object' ? getItem(argsNode, pname) : undefined;
      let found = false;
      if (prop.type === 'boolean' && v?.kind === 'bool') {
        args[pname] = v.value;
        found = true;
      } else if (prop.type === 'integer' && v?.kind === 'number') {
        const n = v.valueint;
        if (prop.minimum !== undefined && n < toCInt(prop.minimum)) {
          return this.replyError(id, `Value is below minimum allowed: ${toCInt(prop.minimum)}`, true);
        }
        if (prop.maximum !== undefined && n > toCInt(prop.maximum)) {
          return this.replyError(id, `Value exceeds maximum allowed: ${toCInt(prop.maximum)}`, true);
        }
        args[pname] = n;
        found = true;
      } else if (prop.type === 'string' && v?.kind === 'string') {
        args[pname] = v.value;
        found = true;
      }
      if (!found) {
        if (prop.default === undefined) {
          this.logLine('MCP', `tools/call: Missing valid argument: ${pname}`);
          return this.replyError(id, `Missing valid argument: ${pname}`, true);
        }
        args[pname] = prop.default;
      }
    }
    const gen = this.main.generation;
    this.main.schedule(async () => {
      let payload: string;
      try {
        const ret = await tool.run(args, this);
        payload = `{"jsonrpc":"2.0","id":${id},"result":${callResultJson(ret)}}`;
      } catch (e) {
        const message = e instanceof Error ? e.message : String(e);
        this.logLine('MCP', `tools/call: ${message}`);
        payload = `{"jsonrpc":"2.0","id":${id},"error":{"message":"${message}"}}`;
      }
      if (gen !== this.main.generation) return; // the device rebooted meanwhile
      this.sendMcpMessage(payload, true);
    });
  }

  /**
   * Esp32Camera::Explain: POST the photo to the vision URL as multipart (question first, then the file),
   * with Device-Id, Client-Id and `Authorization: Bearer <token>` (only when a token was given). A status
   * other than 200 throws "Failed to upload photo"; otherwise the raw body is the result.
   */
  async explain(question: string, jpeg: Buffer): Promise<string> {
    if (!this.vision || this.vision.url === '') throw new Error('Image explain URL or token is not set');
    const boundary = '----ESP32_CAMERA_BOUNDARY';
    const body = Buffer.concat([
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="question"\r\n\r\n${question}\r\n`),
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="camera.jpg"\r\nContent-Type: image/jpeg\r\n\r\n`),
      jpeg,
      Buffer.from(`\r\n--${boundary}--\r\n`),
    ]);
    const headers: Record<string, string> = {
      'Device-Id': this.deviceId,
      'Client-Id': this.clientId,
      'Content-Type': `multipart/form-data; boundary=${boundary}`,
    };
    if (this.vision.token) headers['Authorization'] = `Bearer ${this.vision.token}`;
    let res: Response;
    try {
      res = await fetch(this.vision.url, { method: 'POST', headers, body });
    } catch {
      throw new Error('Failed to connect to explain URL');
    }
    const text = await res.text();
    if (res.status !== 200) {
      this.logLine('Esp32Camera', `Failed to upload photo, status code: ${res.status}`);
      throw new Error('Failed to upload photo');
    }
    return text;
  }

  // ---------------------------------------------------------------- test affordances

  sendRaw(text: string | Buffer, opts: { binary?: boolean; topic?: string } = {}): void {
    const link = this.link;
    if (!link?.isOpen()) throw new Error(`${this.deviceId}: not connected`);
    this.sent.push(typeof text === 'string' ? text : text.toString('utf8'));
    link.sendRaw(text, opts);
  }

  sendMcp(payload: Record<string, unknown>): void {
    this.sendRaw(this.envelope(JSON.stringify(payload)));
  }

  notify(method: string, params?: Record<string, unknown>): void {
    this.sendMcp(params === undefined ? { jsonrpc: '2.0', method } : { jsonrpc: '2.0', method, params });
  }

  /**
   * Keep the main task busy until the returned function is called, as a long tool, a voice-session wait
   * or a Wi-Fi reconnect does on the real device: requests still arrive and are validated, but every reply
   * (initialize, tools/list, tools/call) waits behind this job, in scheduling order.
   */
  /** A device whose network task stops reading its socket (a stalled radio); `false` reads again. */
  pauseReading(paused = true): void {
    this.link?.pauseReading(paused);
  }

  stallMainTask(): () => void {
    const gate = deferred<void>();
    this.main.schedule(() => gate.promise);
    return () => gate.resolve();
  }

  holdReplies(): void {
    this.held ??= [];
  }

  releaseReplies(): void {
    const held = this.held ?? [];
    this.held = undefined;
    for (const payload of held) this.sendText(this.envelope(payload));
  }

  waitForMcp(pred: (p: Record<string, unknown>) => boolean, timeoutMs = 15_000): Promise<Record<string, unknown>> {
    return this.waitIn(this.mcpReceived, this.mcpWaiters, pred, timeoutMs, 'MCP payload');
  }

  waitForFrame(pred: (f: Record<string, unknown>) => boolean, timeoutMs = 15_000): Promise<Record<string, unknown>> {
    return this.waitIn(this.received, this.frameWaiters, pred, timeoutMs, 'frame');
  }

  closed(): Promise<CloseInfo> {
    return this.link ? this.link.closedInfo.promise : Promise.resolve(this.lastClose);
  }

  async close(): Promise<void> {
    await this.link?.close();
  }

  terminate(): void {
    this.link?.terminate();
  }

  private push<T>(list: T[], waiters: Array<Waiter<T>>, item: T): void {
    list.push(item);
    for (const w of [...waiters]) {
      let hit = false;
      try {
        hit = w.pred(item);
      } catch {
        hit = false;
      }
      if (hit) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(item);
      }
    }
  }

  private waitIn<T>(list: T[], waiters: Array<Waiter<T>>, pred: (v: T) => boolean, timeoutMs: number, what: string): Promise<T> {
    const safe = (v: T): boolean => {
      try {
        return pred(v);
      } catch {
        return false;
      }
    };
    const hit = list.find(safe);
    if (hit !== undefined) return Promise.resolve(hit);
    return new Promise<T>((resolve, reject) => {
      const waiter: Waiter<T> = {
        pred: safe,
        resolve: (v) => {
          clearTimeout(timer);
          resolve(v);
        },
      };
      const timer = setTimeout(() => {
        const i = waiters.indexOf(waiter);
        if (i !== -1) waiters.splice(i, 1);
        reject(new Error(`${this.deviceId}: no matching ${what} within ${timeoutMs} ms (${list.length} received)`));
      }, timeoutMs);
      waiters.push(waiter);
    });
  }
}

/** DecodeHexString + the 16-byte length check of ParseServerHello. */
function decodeHex16(hex: string): Buffer | undefined {
  if (hex.length !== 32 || !/^[0-9a-fA-F]+$/.test(hex)) return undefined;
  return Buffer.from(hex, 'hex');
}

/** lwIP gethostbyname: an empty name fails at once; the simulator has no DNS, so any other name resolves. */
function resolvableHost(host: string): boolean {
  return host.length > 0 && host.length <= 255;
}

function rawToString(data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8');
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data).toString('utf8');
}

/** N synthetic board tools, `self.sim.tool_<i>` (0-based), ~200-byte descriptions, 2-3 properties. */
function syntheticTools(n: number): RefTool[] {
  const out: RefTool[] = [];
  for (let i = 0; i < n; i++) {
    const name = `self.sim.tool_${i}`;
    const text =
      `Synthetic board tool number ${i}, registered by the simulator to exercise tools/list pagination. ` +
      'It takes a level between 0 and 100 and an optional label, and echoes its arguments back as a JSON object. ' +
      'Padding padding padding.';
    const description = text.slice(0, 200);
    const properties: Record<string, RefProperty> = {
      level: { type: 'integer', minimum: 0, maximum: 100 },
      label: { type: 'string', default: 'none' },
    };
    if (i % 2 === 0) properties['enabled'] = { type: 'boolean', default: true };
    out.push({ name, description, properties, run: (args) => ({ tool: name, args }) });
  }
  return out;
}

/** A bare `self.audio_speaker.set_volume` that records each volume it is given in `into` and answers true. */
export function recordingVolumeTool(into: number[]): RefTool {
  return {
    name: 'self.audio_speaker.set_volume',
    description: 'Set the volume',
    properties: { volume: { type: 'integer' } },
    run: (a) => (into.push(Number(a['volume'])), true),
  };
}

/**
 * The reference common tools (AI-visible): self.get_device_status, self.audio_speaker.set_volume,
 * self.screen.set_brightness, self.camera.take_photo; user-only: self.get_system_info, self.reboot.
 * Descriptions are the simulator's own wording.
 */
export function referenceTools(): RefTool[] {
  return [
    {
      name: 'self.get_device_status',
      description:
        'Returns the live state of the device: speaker volume, screen brightness and theme, battery, network and chip.\n' +
        'Call it to answer questions about the current state, and before changing a setting whose current value is unknown.',
      run: (_args, d) => ({
        audio_speaker: { volume: d.volume },
        screen: { brightness: d.brightness, theme: 'light' },
        battery: { level: 87, charging: false },
        network: { type: 'wifi', ssid: 'voxgate-sim', signal: 'strong' },
        chip: { temperature: 41 },
      }),
    },
    {
      name: 'self.audio_speaker.set_volume',
      description: 'Sets the speaker volume. If the current volume is not known, call `self.get_device_status` first, then this tool.',
      properties: { volume: { type: 'integer', minimum: 0, maximum: 100 } },
      run: (args, d) => {
        d.volume = args['volume'] as number;
        return true;
      },
    },
    {
      name: 'self.screen.set_brightness',
      description: 'Sets the screen backlight brightness.',
      properties: { brightness: { type: 'integer', minimum: 0, maximum: 100 } },
      run: (args, d) => {
        d.brightness = args['brightness'] as number;
        return true;
      },
    },
    {
      name: 'self.camera.take_photo',
      description:
        'Takes a photo and has it explained. Use it when the user asks you to look at something.\n' +
        'Args:\n  `question`: what you want to know about the photo.\nReturn:\n  A JSON object describing the photo.',
      properties: { question: { type: 'string' } },
      run: (args, d) => {
        if (d.cameraJpeg) return d.explain(String(args['question']), d.cameraJpeg);
        if (!d.vision || d.vision.url === '') throw new Error('Image explain URL or token is not set');
        return JSON.stringify({ success: true, action: 'RESPONSE', response: `Simulated answer to: ${String(args['question'])}` });
      },
    },
    {
      name: 'self.get_system_info',
      description: 'Get the system information',
      userOnly: true,
      run: (_args, d) => ({
        mac_address: d.deviceId,
        uuid: d.clientId,
        chip_model_name: 'esp32s3',
        application: { name: 'xiaozhi', version: d.firmwareVersion },
        board: { type: d.boardName },
      }),
    },
    {
      name: 'self.reboot',
      description: 'Reboot the system',
      userOnly: true,
      run: (_args, d) => {
        // like the firmware: a job that waits 1 s and reboots, scheduled ahead of this call's own reply
        const boot = d.restarts;
        d.schedule(async () => {
          await delay(1000);
          if (d.restarts === boot) d.reboot('self.reboot');
        });
        return true;
      },
    },
  ];
}
