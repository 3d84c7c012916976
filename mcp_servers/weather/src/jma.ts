import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';

/**
 * The Japan Meteorological Agency's forecast JSON: `{base}/bosai/forecast/data/forecast/{area}.json`.
 * An array; its first element is the short-range forecast (`publishingOffice`, `reportDatetime`,
 * `timeSeries[]`), each time series a list of `timeDefines` and of `areas[]` carrying `weathers`/`winds`,
 * `pops` (probability of precipitation, %) or `temps` (°C), aligned with `timeDefines`.
 */
const Area = z.object({ name: z.string(), code: z.string() });
const SeriesArea = z
  .object({
    area: Area,
    weathers: z.array(z.string()).optional(),
    winds: z.array(z.string()).optional(),
    waves: z.array(z.string()).optional(),
    pops: z.array(z.string()).optional(),
    temps: z.array(z.string()).optional(),
  })
  .loose();
const TimeSeries = z.object({ timeDefines: z.array(z.string()).max(64), areas: z.array(SeriesArea).max(256) }).loose();
const Forecast = z.object({ publishingOffice: z.string(), reportDatetime: z.string(), timeSeries: z.array(TimeSeries).min(1).max(16) }).loose();
export const ForecastDocument = z.array(Forecast).min(1);
export type ForecastDocument = z.infer<typeof ForecastDocument>;

/** A few cities and prefectures, in Japanese and romaji, mapped to their JMA office area codes. */
export const AREAS: Record<string, { code: string; name: string }> = {};
const add = (code: string, name: string, ...aliases: string[]) => {
  for (const a of [name, ...aliases]) AREAS[a.toLowerCase()] = { code, name };
};
add('130000', '東京都', '東京', 'tokyo', 'toukyou');
add('140000', '神奈川県', '神奈川', '横浜', 'kanagawa', 'yokohama');
add('270000', '大阪府', '大阪', 'osaka', 'oosaka');
add('260000', '京都府', '京都', 'kyoto', 'kyouto');
add('230000', '愛知県', '愛知', '名古屋', 'aichi', 'nagoya');
add('016000', '石狩・空知・後志地方', '札幌', '北海道', 'sapporo', 'hokkaido');
add('040000', '宮城県', '宮城', '仙台', 'miyagi', 'sendai');
add('340000', '広島県', '広島', 'hiroshima');
add('400000', '福岡県', '福岡', 'fukuoka');
add('471000', '沖縄本島地方', '沖縄', '那覇', 'okinawa', 'naha');

export function resolveArea(input: string): { code: string; name: string } | undefined {
  const s = input.trim();
  if (/^\d{6}$/.test(s)) return { code: s, name: Object.values(AREAS).find((a) => a.code === s)?.name ?? s };
  return AREAS[s.toLowerCase()] ?? AREAS[s.toLowerCase().replace(/[都府県市]$/, '')];
}

export interface ForecastOptions {
  baseUrl: string;
  /** Offline: read `<dataDir>/<area code>.json` (files saved from the JMA API) instead of asking the service. */
  dataDir?: string | undefined;
  timeoutMs: number;
  maxBytes: number;
}

export class WeatherError extends Error {}

/** Fetch (or, with `dataDir`, read) and check one area's forecast. */
export async function fetchForecast(code: string, o: ForecastOptions): Promise<ForecastDocument> {
  return parseForecast(o.dataDir === undefined ? await download(code, o) : await readSaved(code, o.dataDir, o.maxBytes));
}

async function readSaved(code: string, dir: string, maxBytes: number): Promise<string> {
  // `code` is 6 digits (resolveArea): it cannot name a file outside `dir`.
  if (!/^\d{6}$/.test(code)) throw new WeatherError(`no forecast for area code ${code}`);
  const file = join(dir, `${code}.json`);
  try {
    if ((await stat(file)).size > maxBytes) throw new WeatherError('the forecast is unexpectedly large');
    return await readFile(file, 'utf8');
  } catch (e) {
    if (e instanceof WeatherError) throw e;
    throw new WeatherError(`no saved forecast for area code ${code} (offline data in ${dir})`);
  }
}

async function download(code: string, o: ForecastOptions): Promise<string> {
  const url = `${o.baseUrl.replace(/\/+$/, '')}/bosai/forecast/data/forecast/${code}.json`;
  let res: Response;
  try {
    res = await fetch(url, { signal: AbortSignal.timeout(o.timeoutMs), headers: { accept: 'application/json' } });
  } catch (e) {
    throw new WeatherError(`the forecast service could not be reached (${(e as Error).message})`);
  }
  if (res.status === 404) throw new WeatherError(`no forecast for area code ${code}`);
  if (!res.ok) throw new WeatherError(`the forecast service answered HTTP ${res.status}`);
  const text = await res.text();
  if (text.length > o.maxBytes) throw new WeatherError('the forecast is unexpectedly large');
  return text;
}

function parseForecast(text: string): ForecastDocument {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new WeatherError('the forecast service sent something that is not JSON');
  }
  const r = ForecastDocument.safeParse(json);
  if (!r.success) throw new WeatherError(`the forecast has an unexpected shape (${r.error.issues[0]?.path.join('.')}: ${r.error.issues[0]?.message})`);
  return r.data;
}

export interface Summary {
  office: string;
  reportedAt: string;
  areas: Array<{
    area: string;
    code: string;
    days: Array<{ time: string; weather?: string; wind?: string }>;
    precipitation: Array<{ time: string; percent: number }>;
  }>;
  temperatures: Array<{ station: string; readings: Array<{ time: string; celsius: number }> }>;
}

/** The short-range forecast (first element) as plain data. */
export function summarize(doc: ForecastDocument): Summary {
  const f = doc[0]!;
  const areas = new Map<string, Summary['areas'][number]>();
  const temperatures: Summary['temperatures'] = [];
  const num = (s: string | undefined) => (s === undefined || s.trim() === '' ? NaN : Number(s));
  for (const ts of f.timeSeries) {
    for (const a of ts.areas) {
      if (a.temps) {
        const readings = ts.timeDefines.map((time, i) => ({ time, celsius: num(a.temps![i]) })).filter((r) => Number.isFinite(r.celsius));
        temperatures.push({ station: a.area.name, readings });
        continue;
      }
      const entry = areas.get(a.area.code) ?? { area: a.area.name, code: a.area.code, days: [], precipitation: [] };
      areas.set(a.area.code, entry);
      if (a.weathers || a.winds)
        entry.days = ts.timeDefines.map((time, i) => {
          const day: { time: string; weather?: string; wind?: string } = { time };
          const w = a.weathers?.[i]?.replace(/\u3000/g, ' ');
          if (w) day.weather = w;
          const wind = a.winds?.[i]?.replace(/\u3000/g, ' ');
          if (wind) day.wind = wind;
          return day;
        });
      if (a.pops) entry.precipitation = ts.timeDefines.map((time, i) => ({ time, percent: num(a.pops![i]) })).filter((p) => Number.isFinite(p.percent));
    }
  }
  return { office: f.publishingOffice, reportedAt: f.reportDatetime, areas: [...areas.values()], temperatures };
}

export function toText(s: Summary, requested: string): string {
  const lines = [`${requested}: forecast by ${s.office}, issued ${s.reportedAt}`];
  for (const a of s.areas) {
    lines.push(`${a.area}:`);
    for (const d of a.days) lines.push(`  ${d.time.slice(0, 10)}: ${d.weather ?? '?'}${d.wind ? ` (wind: ${d.wind})` : ''}`);
    if (a.precipitation.length)
      lines.push(`  chance of rain: ${a.precipitation.map((p) => `${p.time.slice(5, 16).replace('T', ' ')} ${p.percent}%`).join(', ')}`);
  }
  for (const t of s.temperatures)
    if (t.readings.length)
      lines.push(`${t.station} temperatures: ${t.readings.map((r) => `${r.time.slice(5, 16).replace('T', ' ')} ${r.celsius}°C`).join(', ')}`);
  return lines.join('\n');
}
