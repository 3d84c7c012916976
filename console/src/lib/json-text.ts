/** Text that is a JSON object or array, indented; undefined for anything else (it is shown as it came). No DOM: unit-tested in Node. */
export function prettyJson(text: string): string | undefined {
  const t = text.trim();
  if (!(t.startsWith('{') && t.endsWith('}')) && !(t.startsWith('[') && t.endsWith(']'))) return undefined;
  // Past this a tool's text is shown as it came: parsing and re-indenting megabytes would stall the page.
  if (t.length > 512 * 1024) return undefined;
  try {
    return JSON.stringify(JSON.parse(t) as unknown, null, 2);
  } catch {
    return undefined;
  }
}
