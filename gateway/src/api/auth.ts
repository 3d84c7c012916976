import type { FastifyInstance, FastifyRequest } from 'fastify';
import { safeEqual } from '@voxgate/protocol';
import { GatewayError } from '../errors.js';

/** Bearer API keys for everything under the plugin that calls this. */
export function requireApiKey(app: FastifyInstance, keys: () => readonly string[]): void {
  app.addHook('onRequest', async (req: FastifyRequest, reply) => {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    if (m && keys().some((k) => safeEqual(k, m[1]!))) return;
    void reply.header('www-authenticate', 'Bearer realm="voxgate"');
    throw new GatewayError('UNAUTHORIZED', m ? 'the API key is not valid' : 'send an API key: Authorization: Bearer <key>');
  });
}
