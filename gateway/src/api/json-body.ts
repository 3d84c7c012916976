import { checkJsonBounds } from '@voxgate/protocol';
import type { FastifyInstance } from 'fastify';
import { GatewayError } from '../errors.js';

/**
 * Deepest JSON body the API parses. Its bodies are shallow (a tool call's arguments reach a device inside a frame
 * that may nest 64 levels in all); a body 5 000 levels deep within the size limit parsed, then overflowed the stack
 * of the first code that serialized it (a 500 where the caller had sent a bad request).
 */
export const MAX_BODY_DEPTH = 64;

/**
 * The app's JSON parser: fastify's own (prototype-poisoning checks included), after one pass over the text that
 * refuses a body nested deeper than MAX_BODY_DEPTH (400 INVALID_REQUEST). Size is fastify's `bodyLimit`.
 */
export function registerBoundedJsonParser(app: FastifyInstance): void {
  const json = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    const bounds = checkJsonBounds(text, { maxDepth: MAX_BODY_DEPTH, maxBytes: Number.MAX_SAFE_INTEGER });
    if (!bounds.ok) return done(new GatewayError('INVALID_REQUEST', `the JSON body is ${bounds.detail}`), undefined);
    json(req, text, done);
  });
}
