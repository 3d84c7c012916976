import { describe, expect, it } from 'vitest';
import { toolsFromOpenApi } from '../../src/hub/openapi.js';
import { LAMPS_SPEC as spec } from '../fixtures/lamps-openapi.js';

describe('toolsFromOpenApi (moved from e2e/hub-openapi.test.ts)', () => {
  it('turns every operation into a tool: operationId or method_path, merged parameters, summary + description', () => {
    const tools = toolsFromOpenApi(spec);
    expect(tools.map((x) => x.tool.name).sort()).toEqual(['listLamps', 'post_rooms_room_lamps', 'whoami']);
    const list = tools.find((x) => x.tool.name === 'listLamps')!.tool;
    expect(list.description).toBe('List the lamps of a room\n\nOnly lamps that are switched on, unless all=true.');
    expect(list.inputSchema).toEqual({ type: 'object', properties: { room: { type: 'string' }, all: { type: 'boolean' } }, required: ['room'] });
    const post = tools.find((x) => x.tool.name === 'post_rooms_room_lamps')!.tool;
    expect(post.inputSchema.properties).toEqual({ room: { type: 'string' }, name: { type: 'string' }, watts: { type: 'integer' } });
    expect(new Set(post.inputSchema.required)).toEqual(new Set(['room', 'name']));
    expect(() => toolsFromOpenApi({ openapi: '3.0.0', paths: { '/x': { get: { parameters: [{ $ref: 'https://evil.example/p.json' }] } } } })).toThrow(
      /local \$refs/,
    );
    expect(() => toolsFromOpenApi({ swagger: '2.0', paths: {} })).toThrow(/OpenAPI 3/);
  });

  it('refuses a document without paths, a $ref it cannot resolve, and two operations with one name', () => {
    expect(() => toolsFromOpenApi({ openapi: '3.1.0' })).toThrow(/^not an OpenAPI 3\.0\/3\.1 document: paths /);
    expect(() => toolsFromOpenApi({ openapi: '3.1.0', paths: { '/x': { get: { parameters: [{ $ref: '#/components/parameters/none' }] } } } })).toThrow(
      'unresolved $ref #/components/parameters/none',
    );
    const twice = { openapi: '3.1.0', paths: { '/a': { get: { operationId: 'same' } }, '/b': { get: { operationId: 'same' } } } };
    expect(() => toolsFromOpenApi(twice)).toThrow('two operations are both named "same"; give them distinct operationIds');
  });
});
