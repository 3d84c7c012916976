import { z } from 'zod';
import { always, Bool, env, Port } from '../config/fields.js';

/**
 * TLS on the gateway itself (docs/deployment.md, "TLS"): with certFile and keyFile, the HTTP port serves
 * HTTPS/WSS and the broker gets a second, TLS listener. Files are read at start and on SIGUSR2.
 */
export const TlsSlice = z
  .strictObject({
    /** PEM certificate (leaf first; intermediates may follow). */
    certFile: env(
      'GATEWAY_TLS_CERT_FILE',
      z.string().min(1).optional(),
      'TLS on the gateway: HTTPS/WSS on the HTTP port, MQTT over TLS on `tls.mqttPort`; reread on SIGUSR2: see [docs/deployment.md](docs/deployment.md#tls)',
    ),
    /** PEM private key of certFile. */
    keyFile: env('GATEWAY_TLS_KEY_FILE', z.string().min(1).optional(), "the certificate's private key (PEM)"),
    /** PEM intermediate/CA certificates that complete the chain presented, when certFile holds the leaf only. */
    caFile: env('GATEWAY_TLS_CA_FILE', z.string().min(1).optional(), 'intermediates that complete the chain, when the certificate file holds the leaf only'),
    /** MQTT over TLS (the reference firmware uses TLS exactly when the port it is given is 8883). */
    mqttEnabled: env('GATEWAY_TLS_MQTT_ENABLED', Bool.default(true), 'a TLS listener for the broker'),
    mqttPort: env('GATEWAY_TLS_MQTT_PORT', Port.default(8883), '… on this port (the firmware uses TLS exactly when its MQTT port is 8883)'),
    /**
     * What OTA hands devices. `auto`: wss:// when the OTA request came over HTTPS (here or, per
     * X-Forwarded-Proto, at a trusted proxy) and host:<mqttPort> when the TLS broker listener is on;
     * `tls`: always (TLS terminated in front of the gateway); `plain`: ws:// and mqtt.port.
     */
    advertise: env(
      'GATEWAY_TLS_ADVERTISE',
      z.enum(['auto', 'tls', 'plain']).default('auto'),
      'what OTA hands devices: `auto`, `tls` (TLS terminated in front) or `plain`',
    ),
  })
  .refine((t) => (t?.certFile === undefined) === (t?.keyFile === undefined), {
    path: ['keyFile'],
    message: 'tls.certFile and tls.keyFile go together',
    when: always,
  })
  .refine((t) => !(t?.caFile !== undefined && t.certFile === undefined), {
    path: ['caFile'],
    message: 'needs tls.certFile and tls.keyFile',
    when: always,
  });
export type TlsConfig = z.infer<typeof TlsSlice>;
