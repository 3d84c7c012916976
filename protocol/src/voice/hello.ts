import { z } from 'zod';
import { AudioParamsSchema, DEFAULT_SERVER_AUDIO, type AudioParams } from '../hello.js';
import { mintDeviceToken } from '../hmac-token.js';

/**
 * The voice server's hello as a relay reads it (xiaozhi-esp32-server sends
 * `{type:"hello",version,transport,session_id,audio_params}`); only what is passed on is kept, bounded.
 */
export const UpstreamHelloSchema = z
  .object({
    type: z.literal('hello'),
    session_id: z.string().min(1).max(128),
    transport: z.string().max(32).optional(),
    audio_params: AudioParamsSchema.optional(),
  })
  .loose();
export type UpstreamHello = z.infer<typeof UpstreamHelloSchema>;

export interface UdpEndpoint {
  server: string;
  port: number;
  key: Buffer;
  nonce: Buffer;
}

export interface UdpServerHello {
  type: 'hello';
  transport: 'udp';
  session_id: string;
  audio_params: AudioParams;
  udp: { server: string; port: number; encryption: 'aes-128-ctr'; key: string; nonce: string };
}

/** The hello an MQTT device needs before it opens its UDP channel: every `udp` field is required by the firmware. */
export function buildUdpServerHello(sessionId: string, audio: AudioParams, udp: UdpEndpoint): UdpServerHello {
  return {
    type: 'hello',
    transport: 'udp',
    session_id: sessionId,
    audio_params: audio,
    udp: { server: udp.server, port: udp.port, encryption: 'aes-128-ctr', key: udp.key.toString('hex'), nonce: udp.nonce.toString('hex') },
  };
}

/**
 * The answer to an MQTT voice request while this gateway serves no voice: the only reply that ends the
 * firmware's OpenAudioChannel wait at once is a complete UDP server hello (anything else, a goodbye
 * included, leaves it blocked for 10 s, delaying every MCP reply). Its `udp.server` is empty, so the
 * device's UDP connect fails at once (gethostbyname("")): it returns to idle without an error alert and
 * sends no audio. A goodbye with the same session id should follow, closing the channel on any network
 * stack that does connect. Key and nonce are random: nothing is ever encrypted with them.
 */
export function buildNoVoiceUdpHello(sessionId: string, key: Buffer, nonce: Buffer, audio: AudioParams = DEFAULT_SERVER_AUDIO): UdpServerHello {
  return buildUdpServerHello(sessionId, audio, { server: '', port: 1, key, nonce });
}

/** How a relay proves itself to the voice server: a static token, or xiaozhi-server's HMAC device token. */
export type UpstreamCredential = { token: string } | { hmacSecret: string } | Record<string, never>;

/**
 * The `Authorization` header for the upstream WebSocket: `Bearer <token>` (xiaozhi-esp32-server's
 * AuthManager reads the part after "Bearer "), with the HMAC token
 * `base64url(HMAC-SHA256(secret, "clientId|deviceId|ts")).ts` minted per connection.
 */
export function upstreamAuthorization(cred: UpstreamCredential, clientId: string, deviceId: string, nowSeconds: number): string | undefined {
  if ('token' in cred && typeof cred.token === 'string') return `Bearer ${cred.token}`;
  if ('hmacSecret' in cred && typeof cred.hmacSecret === 'string') return `Bearer ${mintDeviceToken(cred.hmacSecret, clientId, deviceId, nowSeconds)}`;
  return undefined;
}
