import SwaggerParser from '@apidevtools/swagger-parser';
import { describe, expect, it } from 'vitest';
import { startTestGateway } from '../../../test/support/gateway-harness.js';

describe('OpenAPI document', () => {
  // Validating the whole document is CPU work that grows with the routes: a hang guard, not a budget.
  it('is a valid OpenAPI 3 document describing every route, and /docs serves the UI', { timeout: 90_000 }, async () => {
    const t = await startTestGateway();
    try {
      const doc = (await (await fetch(`${t.baseUrl}/openapi.json`)).json()) as { paths: Record<string, Record<string, { security?: unknown[] }>> };
      await SwaggerParser.validate(structuredClone(doc) as never);
      expect(Object.keys(doc.paths).sort()).toEqual(
        [
          '/firmware/{file}',
          '/healthz',
          '/metrics',
          '/readyz',
          '/v1/devices',
          '/v1/devices/{deviceId}',
          '/v1/devices/{deviceId}/firmware',
          '/v1/devices/{deviceId}/photos',
          '/v1/devices/{deviceId}/photos/{photoId}',
          '/v1/devices/{deviceId}/rpc',
          '/v1/devices/{deviceId}/tools',
          '/v1/devices/{deviceId}/tools/{toolName}/call',
          '/v1/events',
          '/v1/events/history',
          '/v1/mcp/endpoints',
          '/v1/mcp/endpoints/{id}',
          '/v1/mcp/instructions',
          '/v1/mcp/prompts',
          '/v1/mcp/prompts/{name}/get',
          '/v1/mcp/resources',
          '/v1/mcp/resources/read',
          '/v1/mcp/servers',
          '/v1/metrics/history',
          '/v1/tools',
          '/v1/tools/{name}/call',
          '/xiaozhi/ota/',
          '/xiaozhi/ota/activate',
          '/v1/enrollments',
          '/v1/enrollments/refused',
          '/v1/enrollments/{code}/approve',
          '/v1/enrollments/{code}/reject',
          '/v1/enrollments/devices/{deviceId}',
          '/v1/enrollments/devices/{deviceId}/reenroll',
          '/v1/assistant/chat',
          '/v1/assistant/conversations/{id}',
          '/v1/assistant/models',
          '/v1/assistant/turns/{id}',
          '/v1/assistant/turns/{turnId}/confirmations/{callId}',
          '/v1/chat/completions',
          '/v1/models',
          '/v1/models/{id}',
          '/v1/devices/{deviceId}/calls',
          '/v1/calls/{callId}',
          '/v1/jobs',
          '/v1/jobs/{jobId}',
          '/v1/jobs/{jobId}/devices',
          '/v1/jobs/{jobId}/cancel',
          '/v1/schedules',
          '/v1/schedules/{id}',
        ].sort(),
      );
      expect(doc.paths['/v1/devices']!['get']!.security).toEqual([{ apiKey: [] }]);
      expect(doc.paths['/v1/tools']!['get']!.security).toEqual([{ apiKey: [] }]);
      expect(doc.paths['/firmware/{file}']!['get']!.security).toBeUndefined(); // devices download without a key
      const docs = await fetch(`${t.baseUrl}/docs`);
      expect(docs.status).toBe(200);
      expect(await docs.text()).toContain('swagger');
      // The UI page carries its own CSP, is framed by nobody, and is not sniffed (it had no such header: red team 3).
      const csp = docs.headers.get('content-security-policy') ?? '';
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).toContain("object-src 'none'");
      expect(csp).not.toContain('upgrade-insecure-requests');
      expect(docs.headers.get('x-content-type-options')).toBe('nosniff');
      // GET / is mounted and points there (its answers: test/api/root.test.ts).
      const root = (await (await fetch(`${t.baseUrl}/`)).json()) as { links: Record<string, string> };
      expect(root.links).toMatchObject({ docs: '/docs', openapi: '/openapi.json' });
    } finally {
      await t.close();
    }
  });
});
