import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';

/**
 * The console's wire types (console/src/lib/types.ts and fleet-types.ts, written by hand: the console talks to
 * the gateway only over HTTP) checked against the gateway's own /openapi.json: every field the console reads
 * exists in the response schema, and a field the console takes as always present is required there. A type
 * the console sends (a request body) is checked the other way too: a field the gateway requires is one the
 * console's type requires.
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
type Operation = {
  parameters?: Array<{ name: string; schema?: Schema }>;
  requestBody?: { content?: Record<string, { schema: Schema }> };
  responses: Record<string, Response>;
};
interface OpenApi {
  paths: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, Schema> };
}

/**
 * Where each console type is found in the document: a route's response (or, with `body`, its request body),
 * then a path of properties/items.
 */
const WHERE: Record<string, { path: string; method: string; status: string; at?: string[]; body?: true }> = {
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
  // fleet-types.ts
  DeviceMeta: { path: '/v1/devices/{deviceId}', method: 'get', status: '200' },
  DeviceMetaSettings: { path: '/v1/devices/{deviceId}', method: 'patch', status: '200' },
  QueuedCall: { path: '/v1/calls/{callId}', method: 'get', status: '200' },
  QueuedCallList: { path: '/v1/devices/{deviceId}/calls', method: 'get', status: '200' },
  JobFilter: { path: '/v1/jobs', method: 'post', status: '', body: true, at: ['filter'] },
  JobBody: { path: '/v1/jobs', method: 'post', status: '', body: true },
  Job: { path: '/v1/jobs/{jobId}', method: 'get', status: '200' },
  JobCounts: { path: '/v1/jobs/{jobId}', method: 'get', status: '200', at: ['counts'] },
  JobList: { path: '/v1/jobs', method: 'get', status: '200' },
  JobDevice: { path: '/v1/jobs/{jobId}/devices', method: 'get', status: '200', at: ['devices', '[]'] },
  JobDeviceList: { path: '/v1/jobs/{jobId}/devices', method: 'get', status: '200' },
  ScheduleCall: { path: '/v1/schedules', method: 'post', status: '', body: true, at: ['call'] },
  ScheduleBody: { path: '/v1/schedules', method: 'post', status: '', body: true },
  Schedule: { path: '/v1/schedules/{id}', method: 'get', status: '200' },
  ScheduleList: { path: '/v1/schedules', method: 'get', status: '200' },
  HistoryPage: { path: '/v1/events/history', method: 'get', status: '200' },
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

/** Every interface of the console's wire-type files, with the fields of the interfaces it extends. */
function consoleTypes(): Map<string, Field[]> {
  const declarations = new Map<string, ts.InterfaceDeclaration>();
  for (const name of ['types.ts', 'fleet-types.ts']) {
    const file = fileURLToPath(new URL(`../../../console/src/lib/${name}`, import.meta.url));
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
    source.forEachChild((n) => {
      if (ts.isInterfaceDeclaration(n)) declarations.set(n.name.text, n);
    });
  }
  const fields = (n: ts.InterfaceDeclaration): Field[] => {
    const own = fieldsOf(n.members);
    const inherited = (n.heritageClauses ?? [])
      .flatMap((h) => h.types.map((t) => declarations.get(t.expression.getText())))
      .flatMap((base) => (base ? fields(base) : []))
      .filter((f) => !own.some((o) => o.name === f.name));
    return [...inherited, ...own];
  };
  return new Map([...declarations].map(([name, n]) => [name, fields(n)]));
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

  /** A request body the console sends: what the gateway requires, the console's type requires too. */
  const unsent = (fields: Field[], raw: Schema, where: string): string[] => {
    const s = objectOf(raw);
    const problems: string[] = [];
    for (const r of s.required ?? []) {
      const f = fields.find((x) => x.name === r);
      if (!f || f.optional) problems.push(`${where}.${r}: required by the gateway, ${f ? 'optional' : 'missing'} in the console's type`);
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
      const op = doc.paths[w.path]?.[w.method];
      const schema = (w.body ? op?.requestBody : op?.responses[w.status])?.content?.['application/json']?.schema;
      if (!schema) {
        problems.push(`${name}: ${w.method.toUpperCase()} ${w.path} has no ${w.body ? 'JSON request body' : `${w.status} JSON response`}`);
        continue;
      }
      const at = (w.at ?? []).reduce(step, schema);
      problems.push(...missing(w.body ? fields.map((f) => ({ ...f, optional: true })) : fields, at, name));
      if (w.body) problems.push(...unsent(fields, at, name));
    }
    expect(problems).toEqual([]);
  });

  it("knows the event types the gateway's /v1/events filter accepts", async () => {
    const { EVENT_TYPES } = await import('../../../console/src/lib/types.js');
    const types = doc.paths['/v1/events']!.get!.parameters?.find((p) => p.name === 'types');
    const text = JSON.stringify(types ?? doc.paths['/v1/events']);
    for (const e of EVENT_TYPES) expect(text).toContain(e);
  });

  it("lists the gateway's event types, fleet ones included, and each is a value of the /v1/events filter", async () => {
    const { EVENT_TYPES } = await import('../../../console/src/lib/types.js');
    const { FLEET_EVENT_TYPES } = await import('../../../console/src/lib/fleet-types.js');
    const gateway = await import('../../src/events/bus.js');
    expect([...EVENT_TYPES, ...FLEET_EVENT_TYPES].sort()).toEqual([...gateway.EVENT_TYPES].sort());
    const text = JSON.stringify(doc.paths['/v1/events']!.get!.parameters?.find((p) => p.name === 'types') ?? doc.paths['/v1/events']);
    for (const e of FLEET_EVENT_TYPES) expect(text).toContain(e);
  });
});
