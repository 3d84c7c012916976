import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Client, type CallToolResult } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchForecast, ForecastDocument, resolveArea, summarize, WeatherError } from '../src/jma.js';

/** The weather server as a real stdio child, against a local fixture server shaped like the JMA API. */
const FIXTURE = readFileSync(fileURLToPath(new URL('./fixtures/130000.json', import.meta.url)), 'utf8');
const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));
const text = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');

describe('JMA forecast parsing', () => {
  it('maps Japanese and romaji names and area codes', () => {
    expect(resolveArea('東京')).toEqual({ code: '130000', name: '東京都' });
    expect(resolveArea('Tokyo')?.code).toBe('130000');
    expect(resolveArea('東京都')?.code).toBe('130000');
    expect(resolveArea('大阪')?.code).toBe('270000');
    expect(resolveArea('sapporo')?.code).toBe('016000');
    expect(resolveArea('471000')?.code).toBe('471000');
    expect(resolveArea('Atlantis')).toBeUndefined();
    expect(resolveArea('13000')).toBeUndefined();
  });

  it('summarizes weathers, winds, chance of rain and temperatures', () => {
    const s = summarize(ForecastDocument.parse(JSON.parse(FIXTURE)));
    expect(s.office).toBe('気象庁');
    expect(s.areas[0]).toMatchObject({ area: '東京地方', code: '130010' });
    expect(s.areas[0]!.days[0]).toEqual({ time: '2026-11-21T11:00:00+09:00', weather: '晴れ 時々 くもり', wind: '北の風' });
    expect(s.areas[0]!.precipitation.map((p) => p.percent)).toEqual([10, 10, 20, 20, 30, 40]);
    expect(s.temperatures[0]).toEqual({
      station: '東京',
      readings: [
        { time: '2026-11-21T09:00:00+09:00', celsius: 17 },
        { time: '2026-11-21T00:00:00+09:00', celsius: 17 },
        { time: '2026-11-22T00:00:00+09:00', celsius: 9 },
        { time: '2026-11-22T09:00:00+09:00', celsius: 16 },
      ],
    });
    expect(ForecastDocument.safeParse([{ publishingOffice: 'x' }]).success).toBe(false);
  });
});

describe('offline forecasts (JMA_DATA_DIR)', () => {
  const dataDir = fileURLToPath(new URL('./fixtures/', import.meta.url));
  const o = { baseUrl: 'http://127.0.0.1:9', timeoutMs: 1000, maxBytes: 2 * 1024 * 1024, dataDir };

  it('reads <dir>/<area code>.json instead of asking the service', async () => {
    expect(summarize(await fetchForecast('130000', o)).office).toBe('気象庁');
  });

  it('answers a tool error for an area with no saved forecast', async () => {
    await expect(fetchForecast('270000', o)).rejects.toThrow(WeatherError);
    await expect(fetchForecast('270000', o)).rejects.toThrow(/no saved forecast for area code 270000/);
  });
});

describe('get_forecast over stdio', () => {
  let http: Server;
  let client: Client;
  const paths: string[] = [];

  beforeAll(async () => {
    http = createServer((req, res) => {
      paths.push(req.url ?? '');
      if (req.url === '/bosai/forecast/data/forecast/130000.json') return res.writeHead(200, { 'content-type': 'application/json' }).end(FIXTURE);
      if (req.url === '/bosai/forecast/data/forecast/270000.json')
        return res.writeHead(200, { 'content-type': 'application/json' }).end('{"not":"a forecast"}');
      if (req.url === '/bosai/forecast/data/forecast/260000.json') return res.writeHead(503).end();
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    const { port } = http.address() as AddressInfo;
    client = new Client({ name: 'weather-test', version: '1' });
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: ['--import', 'tsx', MAIN],
        env: { JMA_BASE_URL: `http://127.0.0.1:${port}`, PATH: process.env['PATH'] ?? '' },
        stderr: 'pipe',
      }),
    );
  });
  afterAll(async () => {
    await client?.close();
    await new Promise((resolve) => http.close(resolve));
  });

  it('offers get_forecast', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(['get_forecast']);
    expect(tools[0]!.inputSchema.required).toEqual(['location']);
  });

  it('answers for a city in Japanese, in romaji, and for an area code', async () => {
    for (const location of ['東京', 'tokyo', '130000']) {
      const r = (await client.callTool({ name: 'get_forecast', arguments: { location } })) as CallToolResult;
      expect(r.isError ?? false, location).toBe(false);
      expect(text(r)).toContain('晴れ 時々 くもり');
      expect(text(r)).toContain('東京 temperatures');
      expect(r.structuredContent).toMatchObject({ areaCode: '130000', office: '気象庁' });
    }
    expect(paths.at(-1)).toBe('/bosai/forecast/data/forecast/130000.json');
  });

  it('turns unknown places and upstream failures into tool errors', async () => {
    const cases: Array<[string, RegExp]> = [
      ['Atlantis', /do not know "Atlantis"/],
      ['osaka', /unexpected shape/],
      ['kyoto', /HTTP 503/],
      ['999999', /no forecast for area code 999999/],
    ];
    for (const [location, msg] of cases) {
      const r = (await client.callTool({ name: 'get_forecast', arguments: { location } })) as CallToolResult;
      expect(r.isError, location).toBe(true);
      expect(text(r)).toMatch(msg);
    }
  });
});
