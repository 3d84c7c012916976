import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadServersFile } from '../../src/hub/config.js';

/** GATEWAY_MCP_CONFIG as TOML: seed 003's `[[servers]]` list, checked as the JSON file is. */
const dir = mkdtempSync(join(tmpdir(), 'voxgate-toml-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string) => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};

describe('TOML server file', () => {
  it("reads seed 003's [[servers]] tables: stdio by default, transport sse and websocket", () => {
    const servers = loadServersFile(
      file(
        'mcp_config.toml',
        `# mcp_config.toml
[[servers]]
name = "filesystem"
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "/home/user/Documents"]

[[servers]]
name = "weather"
command = "/usr/local/bin/weather-mcp-server"
args = []

[[servers]]
name = "database"
url = "http://localhost:8080/mcp"
transport = "sse"

[[servers]]
name = "tools"
url = "wss://tools.example.com/mcp"
transport = "websocket"
`,
      ),
    );
    expect(servers.map((s) => [s.name, s.type, s.command ?? s.url])).toEqual([
      ['filesystem', 'stdio', 'npx'],
      ['weather', 'stdio', '/usr/local/bin/weather-mcp-server'],
      ['database', 'sse', 'http://localhost:8080/mcp'],
      ['tools', 'websocket', 'wss://tools.example.com/mcp'],
    ]);
    expect(servers[0]!.args).toEqual(['-y', '@modelcontextprotocol/server-filesystem', '/home/user/Documents']);
  });

  it('reports problems with the JSON file’s messages, each naming its server', () => {
    const p = file('bad.toml', '[[servers]]\nname = "a"\ntransport = "sse"\n\n[[servers]]\nname = "b b"\ncommand = "x"\n\n[[servers]]\ncommand = "y"\n');
    expect(() => loadServersFile(p)).toThrow(/servers\[2\]: a server needs "name"/);
    const q = file('bad2.toml', '[[servers]]\nname = "a"\ntransport = "sse"\n\n[[servers]]\nname = "b b"\ncommand = "x"\n');
    const err = (() => {
      try {
        loadServersFile(q);
      } catch (e) {
        return (e as Error).message;
      }
      return '';
    })();
    expect(err).toContain('mcpServers.a: a sse server needs "url"');
    expect(err).toContain("mcpServers.b b: a server name is 1-32 letters, digits, _ or -, with no '__' and no '_' at the end");
    expect(() => loadServersFile(file('syntax.toml', '[[servers]\nname = '))).toThrow(/syntax\.toml: not valid TOML/);
    expect(() => loadServersFile(file('shape.toml', 'title = "x"\n'))).toThrow(/expected \[\[servers\]\] tables/);
  });
});
