import type { FastifyInstance } from 'fastify';

/** Where a person who opens the gateway's address should go next. */
const LINKS = { docs: '/docs', console: '/console', openapi: '/openapi.json', health: '/healthz' } as const;

/**
 * `GET /`: a browser (Accept: text/html) gets a tiny page of links, anything else the same links as JSON.
 * Open, like the health probes: it names routes, nothing about the fleet. Not an API route: left out of /openapi.json.
 */
export async function rootRoute(app: FastifyInstance, o: { version: string }): Promise<void> {
  app.get('/', { schema: { hide: true } }, async (req, reply) => {
    if (!(req.headers.accept ?? '').includes('text/html')) return { name: 'voxgate', version: o.version, links: LINKS };
    const items = Object.entries(LINKS)
      .map(([name, href]) => `<li><a href="${href}">${name}</a> <code>${href}</code></li>`)
      .join('');
    return reply
      .type('text/html; charset=utf-8')
      .send(
        `<!doctype html><html><head><meta charset="utf-8"><title>Voxgate</title></head><body><h1>Voxgate ${escapeHtml(o.version)}</h1><ul>${items}</ul></body></html>`,
      );
  });
}

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
