/** The photo formats the gateway accepts: the xiaozhi vision server's list (JPEG, PNG, GIF, WebP and BMP). */
export type ImageType = 'image/jpeg' | 'image/png' | 'image/gif' | 'image/webp' | 'image/bmp';

const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** An image's type told by its first bytes, never by what the sender claims; undefined when none of ours. */
export function imageType(b: Buffer): ImageType | undefined {
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'image/jpeg';
  if (b.length >= 8 && b.subarray(0, 8).equals(PNG_MAGIC)) return 'image/png';
  const text = (from: number, to: number) => b.subarray(from, to).toString('latin1');
  if (b.length >= 6 && (text(0, 6) === 'GIF87a' || text(0, 6) === 'GIF89a')) return 'image/gif';
  if (b.length >= 12 && text(0, 4) === 'RIFF' && text(8, 12) === 'WEBP') return 'image/webp';
  if (b.length >= 2 && b[0] === 0x42 && b[1] === 0x4d) return 'image/bmp';
  return undefined;
}
