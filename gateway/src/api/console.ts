import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance } from 'fastify';
import { GatewayError } from '../errors.js';

export interface ConsoleOptions {
  /** The built console (index.html and assets/). */
  dir?: string | undefined;
  /** Where devices should send their OTA check, when the gateway knows its public URL. */
  publicUrl?: string | undefined;
}

/** console/dist of this checkout: the same depth from gateway/src/api and gateway/dist/api. */
export const DEFAULT_CONSOLE_DIR = fileURLToPath(new URL('../../../console/dist/', import.meta.url));

// The console runs only its own script and talks only to this origin; nothing may frame it.
const HEADERS = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

/**
 * The web console at /console: static files, no API key (they hold no data; the page asks for a key and
 * uses the public /v1 API with it). Any other path under /console gets index.html (client-side routes).
 */
export async function consoleRoutes(app: FastifyInstance, o: ConsoleOptions): Promise<void> {
  const dir = o.dir ?? DEFAULT_CONSOLE_DIR;
  app.get('/console/config.json', { schema: { hide: true } }, async (_req, reply) => {
    void reply.headers(HEADERS);
    return { otaUrl: o.publicUrl ? new URL('/xiaozhi/ota/', o.publicUrl).href : null };
  });
  if (!existsSync(`${dir}/index.html`)) {
    app.get('/console/*', { schema: { hide: true } }, async () => {
      throw new GatewayError('NOT_FOUND', 'the console is not built: run "npm run build"');
    });
    app.get('/console', { schema: { hide: true } }, async () => {
      throw new GatewayError('NOT_FOUND', 'the console is not built: run "npm run build"');
    });
    return;
  }
  await app.register(fastifyStatic, {
    root: dir,
    prefix: '/console/',
    decorateReply: false,
    wildcard: false,
    index: ['index.html'],
    redirect: false, // the router ignores trailing slashes: /console is /console/
    schemaHide: true,
    cacheControl: false,
    setHeaders: (res, path) => {
      for (const [k, v] of Object.entries(HEADERS)) res.setHeader(k, v);
      // Vite names assets by content hash: cache them for good; the page itself is always revalidated.
      res.setHeader('cache-control', /[\\/]assets[\\/]/.test(path) ? 'public, max-age=31536000, immutable' : 'no-cache');
    },
  });
  // Client-side routes (deep links, reloads): the page, never a directory listing or a 404. Read once:
  // the file list is fixed at start too (wildcard: false), so a rebuild is served after a restart.
  const index = readFileSync(`${dir}/index.html`);
  app.get('/console/*', { schema: { hide: true } }, async (_req, reply) =>
    reply
      .headers({ ...HEADERS, 'cache-control': 'no-cache' })
      .type('text/html; charset=utf-8')
      .send(index),
  );
}
