import type { Server as TlsServer } from 'node:tls';
import type { FastifyInstance } from 'fastify';
import { countRequestTimeouts, limitConnections } from '../links/connection-limits.js';
import type { TlsCertificates } from '../tls/certificates.js';
import { closeFailedHandshakes } from '../tls/listener.js';
import { buildApi, type ApiDeps } from './app.js';

/** The HTTP port's app (not listening yet): the API, served over TLS when certificates are given, its sockets capped. */
export async function createHttp(d: Omit<ApiDeps, 'https'>, tls: TlsCertificates | undefined): Promise<FastifyInstance> {
  const http = await buildApi({ ...d, https: tls?.options });
  const log = d.log.child({ component: 'http' });
  if (tls) {
    // buildApi made an https.Server (a tls.Server) for these options; fastify types it as http.Server.
    const server = http.server as unknown as TlsServer;
    tls.serve(server);
    closeFailedHandshakes(server, 'http', d.metrics, log);
  }
  limitConnections(http.server, 'http', d.settings.http, d.metrics, log);
  countRequestTimeouts(http.server, d.metrics);
  return http;
}
