/** A device's photo upload to `/mcp/vision/explain`, as the firmware sends it. */

/** The smallest thing that starts like a JPEG (SOI + APP0 marker), some bytes, and its end marker. */
export const JPEG = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.alloc(600, 7), Buffer.from([0xff, 0xd9])]);

/** A device's upload, as the firmware sends it (question first, then the file). */
export async function upload(
  url: string,
  opts: { deviceId: string; token?: string; file?: Buffer; question?: string },
): Promise<{ status: number; body: Record<string, unknown> }> {
  const form = new FormData();
  form.append('question', opts.question ?? 'what is it?');
  form.append('file', new Blob([new Uint8Array(opts.file ?? JPEG)], { type: 'image/jpeg' }), 'camera.jpg');
  const headers: Record<string, string> = { 'device-id': opts.deviceId };
  if (opts.token) headers['authorization'] = `Bearer ${opts.token}`;
  const res = await fetch(url, { method: 'POST', headers, body: form });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}
