// The conformance suite's server fixture, written from the scenarios' descriptions, hosted by the gateway
// as server "conformance": its tools and prompts become mcp__conformance__<name> (run.ts's pass-through
// maps the suite's bare names onto those), its resource URIs pass through unchanged.
import { completable, fromJsonSchema, McpServer, ResourceTemplate } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { z } from 'zod';

const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
// A 44-byte WAV header with no samples.
const WAV = Buffer.from('524946462400000057415645666d7420100000000100010044ac000088580100020010006461746100000000', 'hex').toString('base64');
const pause = (ms) => new Promise((r) => setTimeout(r, ms));

serveStdio(() => {
  const server = new McpServer({ name: 'conformance', version: '1.0.0' }, { capabilities: { logging: {}, resources: { subscribe: true }, completions: {} } });
  const s = server.server;
  const text = (t) => ({ content: [{ type: 'text', text: t }] });
  const none = z.object({});

  server.registerTool('test_simple_text', { description: 'Simple text', inputSchema: none }, async () => text('This is a simple text response for testing.'));
  server.registerTool('test_image_content', { description: 'Image', inputSchema: none }, async () => ({
    content: [{ type: 'image', data: PNG, mimeType: 'image/png' }],
  }));
  server.registerTool('test_audio_content', { description: 'Audio', inputSchema: none }, async () => ({
    content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }],
  }));
  server.registerTool('test_embedded_resource', { description: 'Embedded resource', inputSchema: none }, async () => ({
    content: [{ type: 'resource', resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' } }],
  }));
  server.registerTool('test_multiple_content_types', { description: 'Mixed content', inputSchema: none }, async () => ({
    content: [
      { type: 'text', text: 'Multiple content types test:' },
      { type: 'image', data: PNG, mimeType: 'image/png' },
      { type: 'resource', resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: '{"test":"data","value":123}' } },
    ],
  }));
  server.registerTool('test_tool_with_logging', { description: 'Logs while running', inputSchema: none }, async (_a, ctx) => {
    await ctx.mcpReq.log('info', 'Tool execution started');
    await pause(50);
    await ctx.mcpReq.log('info', 'Tool processing data');
    await pause(50);
    await ctx.mcpReq.log('info', 'Tool execution completed');
    return text('Tool with logging executed successfully');
  });
  server.registerTool('test_error_handling', { description: 'Always fails', inputSchema: none }, async () => ({
    isError: true,
    content: [{ type: 'text', text: 'This tool intentionally returns an error for testing' }],
  }));
  server.registerTool('test_tool_with_progress', { description: 'Reports progress', inputSchema: none }, async (_a, ctx) => {
    const progressToken = ctx.mcpReq._meta?.progressToken;
    for (const [i, progress] of [0, 50, 100].entries()) {
      if (i > 0) await pause(50);
      if (progressToken !== undefined) await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken, progress, total: 100 } });
    }
    return text('Tool with progress executed successfully');
  });
  server.registerTool('test_sampling', { description: 'Asks for sampling', inputSchema: z.object({ prompt: z.string() }) }, async ({ prompt }, ctx) => {
    const r = await ctx.mcpReq.requestSampling({ messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens: 100 });
    return text(`LLM response: ${r.content.type === 'text' ? r.content.text : JSON.stringify(r.content)}`);
  });
  server.registerTool('test_elicitation', { description: 'Asks the user', inputSchema: z.object({ message: z.string() }) }, async ({ message }, ctx) => {
    const r = await ctx.mcpReq.elicitInput({
      message,
      requestedSchema: {
        type: 'object',
        properties: { username: { type: 'string', description: "User's response" }, email: { type: 'string', description: "User's email address" } },
        required: ['username', 'email'],
      },
    });
    return text(`User response: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`);
  });
  server.registerTool('test_elicitation_sep1034_defaults', { description: 'Elicitation with defaults', inputSchema: none }, async (_a, ctx) => {
    const r = await ctx.mcpReq.elicitInput({
      message: 'Please review and update the form fields with defaults',
      requestedSchema: {
        type: 'object',
        properties: {
          name: { type: 'string', description: 'User name', default: 'John Doe' },
          age: { type: 'integer', description: 'User age', default: 30 },
          score: { type: 'number', description: 'User score', default: 95.5 },
          status: { type: 'string', description: 'User status', enum: ['active', 'inactive', 'pending'], default: 'active' },
          verified: { type: 'boolean', description: 'Verification status', default: true },
        },
        required: [],
      },
    });
    return text(`Elicitation completed: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`);
  });
  server.registerTool('test_elicitation_sep1330_enums', { description: 'Elicitation with enums', inputSchema: none }, async (_a, ctx) => {
    const r = await ctx.mcpReq.elicitInput({
      message: 'Please select options from the enum fields',
      requestedSchema: {
        type: 'object',
        properties: {
          untitledSingle: { type: 'string', description: 'Select one option', enum: ['option1', 'option2', 'option3'] },
          titledSingle: {
            type: 'string',
            description: 'Select one option with titles',
            oneOf: [
              { const: 'value1', title: 'First Option' },
              { const: 'value2', title: 'Second Option' },
              { const: 'value3', title: 'Third Option' },
            ],
          },
          legacyEnum: {
            type: 'string',
            description: 'Select one option (legacy)',
            enum: ['opt1', 'opt2', 'opt3'],
            enumNames: ['Option One', 'Option Two', 'Option Three'],
          },
          untitledMulti: { type: 'array', description: 'Select multiple options', items: { type: 'string', enum: ['option1', 'option2', 'option3'] } },
          titledMulti: {
            type: 'array',
            description: 'Select multiple options with titles',
            items: {
              anyOf: [
                { const: 'value1', title: 'First Choice' },
                { const: 'value2', title: 'Second Choice' },
                { const: 'value3', title: 'Third Choice' },
              ],
            },
          },
        },
        required: [],
      },
    });
    return text(`Elicitation completed: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`);
  });

  server.registerTool(
    'json_schema_2020_12_tool',
    {
      description: 'Tool with JSON Schema 2020-12 features',
      inputSchema: fromJsonSchema({
        $schema: 'https://json-schema.org/draft/2020-12/schema',
        type: 'object',
        $defs: { address: { type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
        properties: { name: { type: 'string' }, address: { $ref: '#/$defs/address' } },
        additionalProperties: false,
      }),
    },
    async () => text('ok'),
  );

  server.registerPrompt('test_simple_prompt', { description: 'Simple prompt' }, () => ({
    messages: [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } }],
  }));
  server.registerPrompt(
    'test_prompt_with_arguments',
    {
      description: 'Prompt with arguments',
      argsSchema: z.object({ arg1: completable(z.string(), (v) => ['paris', 'park', 'party'].filter((x) => x.startsWith(v))), arg2: z.string() }),
    },
    ({ arg1, arg2 }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` } }] }),
  );
  server.registerPrompt(
    'test_prompt_with_embedded_resource',
    { description: 'Embedded resource', argsSchema: z.object({ resourceUri: z.string() }) },
    ({ resourceUri }) => ({
      messages: [
        { role: 'user', content: { type: 'resource', resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } } },
        { role: 'user', content: { type: 'text', text: 'Please process the embedded resource above.' } },
      ],
    }),
  );
  server.registerPrompt('test_prompt_with_image', { description: 'Image prompt' }, () => ({
    messages: [
      { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
      { role: 'user', content: { type: 'text', text: 'Please analyze the image above.' } },
    ],
  }));

  server.registerResource('static-text', 'test://static-text', { mimeType: 'text/plain' }, async (uri) => ({
    contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'This is the content of the static text resource.' }],
  }));
  server.registerResource('static-binary', 'test://static-binary', { mimeType: 'image/png' }, async (uri) => ({
    contents: [{ uri: uri.href, mimeType: 'image/png', blob: PNG }],
  }));
  server.registerResource('watched', 'test://watched-resource', { mimeType: 'text/plain' }, async (uri) => ({
    contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'watched' }],
  }));
  server.registerResource(
    'template',
    new ResourceTemplate('test://template/{id}/data', { list: undefined }),
    { mimeType: 'application/json' },
    async (uri, { id }) => ({
      contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) }],
    }),
  );
  s.setRequestHandler('resources/subscribe', async () => ({}));
  s.setRequestHandler('resources/unsubscribe', async () => ({}));
  return server;
});
process.on('SIGTERM', () => process.exit(0));
