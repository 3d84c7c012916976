import { McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { AREAS, fetchForecast, resolveArea, summarize, toText, WeatherError, type ForecastOptions } from './jma.js';

export const DEFAULT_BASE_URL = 'https://www.jma.go.jp';

export function optionsFromEnv(env: NodeJS.ProcessEnv = process.env): ForecastOptions {
  return {
    baseUrl: env['JMA_BASE_URL'] || DEFAULT_BASE_URL,
    dataDir: env['JMA_DATA_DIR'] || undefined,
    timeoutMs: Number(env['JMA_TIMEOUT_MS'] ?? 10_000) || 10_000,
    maxBytes: 2 * 1024 * 1024,
  };
}

const known = [...new Set(Object.values(AREAS).map((a) => a.name))].join(', ');

/** The weather MCP server: one tool, `get_forecast`. */
export function createWeatherServer(o: ForecastOptions = optionsFromEnv()): McpServer {
  const server = new McpServer({ name: 'voxgate-weather', version: '0.1.0' }, { capabilities: { tools: {} } });
  server.registerTool(
    'get_forecast',
    {
      description:
        'Weather forecast for a place in Japan (today, tomorrow, the day after): weather, wind, chance of rain, temperatures. ' +
        `"location" is a city or prefecture in Japanese or romaji (${known}) or a 6-digit JMA area code such as 130000 (Tokyo).`,
      inputSchema: z.object({ location: z.string().min(1).max(64).describe('e.g. "東京", "osaka", "130000"') }),
      annotations: { readOnlyHint: true, openWorldHint: true },
    },
    async ({ location }) => {
      const area = resolveArea(location);
      if (!area) return { content: [{ type: 'text', text: `I do not know "${location}". Try one of: ${known}, or a 6-digit JMA area code.` }], isError: true };
      try {
        const s = summarize(await fetchForecast(area.code, o));
        return { content: [{ type: 'text', text: toText(s, area.name) }], structuredContent: { requested: location, areaCode: area.code, ...s } };
      } catch (e) {
        if (e instanceof WeatherError) return { content: [{ type: 'text', text: `No forecast for ${area.name}: ${e.message}.` }], isError: true };
        throw e;
      }
    },
  );
  return server;
}
