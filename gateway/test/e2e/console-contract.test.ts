import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';

/**
 * The console's wire types (console/src/lib/types.ts, written by hand: the console talks to the gateway only
 * over HTTP) checked against the gateway's own /openapi.json: every field the console reads exists in the
 * response schema, and a field the console takes as always present is required there.
 */

interface Schema {
  type?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  anyOf?: Schema[];
  oneOf?: Schema[];
  allOf?: Schema[];
  $ref?: string;
}
type Response = { content?: Record<string, { schema: Schema }> };
type Operation = { parameters?: Array<{ name: string; schema?: Schema }>; responses: Record<string, Response> };
interface OpenApi {
  paths: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, Schema> };
}

/** Where each console type is found in the document: a route's response, then a path of properties/items. */
const WHERE: Record<string, { path: string; method: string; status: string; at?: string[] }> = {
  Problem: { path: '/v1/devices/{deviceId}', method: 'get', status: '404' },
  Device: { path: '/v1/devices/{deviceId}', method: 'get', status: '200' },
  DeviceList: { path: '/v1/devices', method: 'get', status: '200' },
  Tool: { path: '/v1/devices/{deviceId}/tools', method: 'get', status: '200', at: ['tools', '[]'] },
  ToolList: { path: '/v1/devices/{deviceId}/tools', method: 'get', status: '200' },
  CallResult: { path: '/v1/devices/{deviceId}/tools/{toolName}/call', method: 'post', status: '200' },
  PendingEnrollment: { path: '/v1/enrollments', method: 'get', status: '200', at: ['enrollments', '[]'] },
  RefusedDevice: { path: '/v1/enrollments/refused', method: 'get', status: '200', at: ['refused', '[]'] },
  EnrolledDevice: { path: '/v1/enrollments/devices/{deviceId}', method: 'get', status: '200' },
  HostedServer: { path: '/v1/mcp/servers', method: 'get', status: '200', at: ['servers', '[]'] },
  MetricHistory: { path: '/v1/metrics/history', method: 'get', status: '200' },
  MetricSample: { path: '/v1/metrics/history', method: 'get', status: '200', at: ['samples', '[]'] },
  Photo: { path: '/v1/devices/{deviceId}/photos', method: 'get', status: '200', at: ['photos', '[]'] },
  FirmwarePreview: { path: '/v1/devices/{deviceId}/firmware', method: 'get', status: '200' },
  HubTool: { path: '/v1/tools', method: 'get', status: '200', at: ['tools', '[]'] },
  HubToolList: { path: '/v1/tools', method: 'get', status: '200' },
  DeviceSettings: { path: '/v1/devices/{deviceId}', method: 'patch', status: '200' },
  McpEndpoint: { path: '/v1/mcp/endpoints', method: 'get', status: '200', at: ['endpoints', '[]'] },
  McpEndpointCreated: { path: '/v1/mcp/endpoints', method: 'post', status: '201' },
};
/** Read from the event stream (text/event-stream, no JSON schema in the document): checked by its type enum below. */
const NOT_IN_DOCUMENT = new Set(['GatewayEvent']);

interface Field {
  name: string;
  optional: boolean;
  /** The fields of an inline object type (`server: {name, version} | null`), checked one level down. */
  inline?: Field[];
}

function fieldsOf(members: ts.NodeArray<ts.TypeElement>): Field[] {
  return members.filter(ts.isPropertySignature).map((p) => {
    const literal = p.type && (ts.isUnionTypeNode(p.type) ? p.type.types.find(ts.isTypeLiteralNode) : ts.isTypeLiteralNode(p.type) ? p.type : undefined);
    return { name: p.name.getText(), optional: p.questionToken !== undefined, ...(literal ? { inline: fieldsOf(literal.members) } : {}) };
  });
}

function consoleTypes(): Map<string, Field[]> {
  const file = fileURLToPath(new URL('../../../console/src/lib/types.ts', import.meta.url));
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const types = new Map<string, Field[]>();
  source.forEachChild((n) => {
    if (ts.isInterfaceDeclaration(n)) types.set(n.name.text, fieldsOf(n.members));
  });
  return types;
}

describe('console/src/lib/types.ts against /openapi.json', () => {
  let t: TestGateway;
  let doc: OpenApi;
  beforeAll(async () => {
    t = await startTestGateway();
    doc = (await (await fetch(`${t.baseUrl}/openapi.json`)).json()) as OpenApi;
  });
  afterAll(async () => {
    await t?.close();
  });

  const deref = (s: Schema): Schema => (s.$ref ? deref(doc.components!.schemas![s.$ref.split('/').pop()!]!) : s);
  /** The object variant of a schema (a nullable object is `anyOf: [object, null]` or `nullable: true`). */
  const objectOf = (raw: Schema): Schema => {
    const s = deref(raw);
    const variants = s.anyOf ?? s.oneOf ?? s.allOf;
    return variants ? objectOf(variants.find((v) => deref(v).properties || deref(v).anyOf || deref(v).oneOf) ?? variants[0]!) : s;
  };
  const step = (s: Schema, key: string): Schema => {
    const o = objectOf(s);
    const next = key === '[]' ? o.items : o.properties?.[key];
    if (!next) throw new Error(`no "${key}" in the schema`);
    return next;
  };
  const missing = (fields: Field[], raw: Schema, where: string): string[] => {
    const s = objectOf(raw);
    const problems: string[] = [];
    for (const f of fields) {
      const prop = s.properties?.[f.name];
      if (!prop) problems.push(`${where}.${f.name}: not in the schema`);
      else if (!f.optional && !(s.required ?? []).includes(f.name)) problems.push(`${where}.${f.name}: required by the console, optional in the schema`);
      else if (f.inline) problems.push(...missing(f.inline, prop, `${where}.${f.name}`));
    }
    return problems;
  };

  it('maps every console type to the document', () => {
    const names = [...consoleTypes().keys()].filter((n) => !NOT_IN_DOCUMENT.has(n));
    expect(names.sort()).toEqual(Object.keys(WHERE).sort());
  });

  it('finds every field the console reads, required where the console needs it', () => {
    const problems: string[] = [];
    for (const [name, fields] of consoleTypes()) {
      const w = WHERE[name];
      if (!w) continue;
      const response = doc.paths[w.path]?.[w.method]?.responses[w.status];
      const schema = response?.content?.['application/json']?.schema;
      if (!schema) {
        problems.push(`${name}: ${w.method.toUpperCase()} ${w.path} has no ${w.status} JSON response`);
        continue;
      }
      problems.push(...missing(fields, (w.at ?? []).reduce(step, schema), name));
    }
    expect(problems).toEqual([]);
  });

  it("knows the event types the gateway's /v1/events filter accepts", async () => {
    const { EVENT_TYPES } = await import('../../../console/src/lib/types.js');
    const types = doc.paths['/v1/events']!.get!.parameters?.find((p) => p.name === 'types');
    const text = JSON.stringify(types ?? doc.paths['/v1/events']);
    for (const e of EVENT_TYPES) expect(text).toContain(e);
  });
});
