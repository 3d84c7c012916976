import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { loadConfig } from '../config.js';

/**
 * Container health check (the Dockerfile's HEALTHCHECK): exit 0 when this gateway's `/readyz` answers 200,
 * 1 otherwise, with the reason on stderr (Docker keeps it in the container's health log). It loads the same
 * configuration as the gateway (defaults, JSON file, GATEWAY_* variables), so a changed port or listen
 * address is followed; the image has no curl, and node is there anyway.
 */
const TIMEOUT_MS = 4000; // under the HEALTHCHECK --timeout (5 s), so the reason is still printed

/** Where this host reaches its own listener: a wildcard address is reached over loopback. */
function localHost(host: string): string {
  return host === '0.0.0.0' || host === '::' || host === '' ? '127.0.0.1' : host;
}

/**
 * With `tls` configured the port speaks HTTPS only. The probe asks the same process over loopback, so the
 * certificate (issued for the public name) is not checked here: readiness is the question, not identity.
 */
function readyStatus(host: string, port: number, tls: boolean): Promise<number> {
  return new Promise((resolve, reject) => {
    const opts = { host, port, path: '/readyz', method: 'GET', timeout: TIMEOUT_MS };
    const onResponse = (res: IncomingMessage) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    };
    const req = tls ? httpsRequest({ ...opts, rejectUnauthorized: false }, onResponse) : httpRequest(opts, onResponse);
    req.on('timeout', () => req.destroy(new Error(`no answer within ${TIMEOUT_MS} ms`)));
    req.on('error', reject);
    req.end();
  });
}

async function main(): Promise<number> {
  let host: string;
  let port: number;
  let tls: boolean;
  try {
    const config = loadConfig();
    host = localHost(config.http.host);
    port = config.http.port;
    tls = config.tls.certFile !== undefined;
  } catch (e) {
    process.stderr.write(`unhealthy: ${e instanceof Error ? e.message : String(e)}\n`);
    return 1;
  }
  try {
    const status = await readyStatus(host, port, tls);
    if (status === 200) return 0;
    process.stderr.write(`unhealthy: /readyz answered ${status}\n`);
  } catch (e) {
    process.stderr.write(`unhealthy: ${host}:${port}: ${e instanceof Error ? e.message : String(e)}\n`);
  }
  return 1;
}

process.exitCode = await main();
