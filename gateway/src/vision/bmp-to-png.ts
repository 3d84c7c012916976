import { createRequire } from 'node:module';
import type { decode as Decode } from 'bmp-ts';
import type { PNG as Png } from 'pngjs';

/** The codecs, loaded by the first BMP photo (most gateways never see one). */
let codecs: { decode: typeof Decode; PNG: typeof Png } | undefined;
function loadCodecs(): { decode: typeof Decode; PNG: typeof Png } {
  if (codecs) return codecs;
  const require = createRequire(import.meta.url);
  codecs = { decode: (require('bmp-ts') as { decode: typeof Decode }).decode, PNG: (require('pngjs') as { PNG: typeof Png }).PNG };
  return codecs;
}

/**
 * No model provider takes BMP (OpenAI, Anthropic and Gemini read JPEG, PNG, WebP and GIF at most), and the
 * ESP32 camera driver's `frame2bmp` makes them: such a photo is re-encoded as a lossless PNG first.
 */

/** Decoded pixels are 4 bytes each: the cap keeps a small RLE file from asking for gigabytes. */
export const MAX_BMP_PIXELS = 4096 * 4096;

const FILE_HEADER_BYTES = 14;
/** BITMAPINFOHEADER compression methods that store every pixel (no run-length coding). */
const BI_RGB = 0;
const BI_BITFIELDS = 3;

/** The BMP as a PNG (RGB, the BMP's alpha is not kept); throws a plain Error when malformed or too large. */
export function bmpToPng(bmp: Buffer): Buffer {
  if (bmp.length < FILE_HEADER_BYTES + 40) throw new Error('the BMP is truncated');
  // Read as the decoder reads them: the width unsigned, the height signed (negative means top-down).
  const width = bmp.readUInt32LE(FILE_HEADER_BYTES + 4);
  const height = Math.abs(bmp.readInt32LE(FILE_HEADER_BYTES + 8));
  if (width === 0 || height === 0 || width * height > MAX_BMP_PIXELS) {
    throw new Error(`the BMP is ${width}x${height}: at most ${MAX_BMP_PIXELS} pixels`);
  }
  // Uncompressed only, its pixel rows all in the file: the work is then bounded by the upload's size. A run-length
  // (RLE) file of 150 KB asked for 16 M pixels, and their decode and PNG encode held the event loop 3 s. The ESP32
  // camera's frame2bmp writes uncompressed rows (BI_RGB).
  const bitsPerPixel = bmp.readUInt16LE(FILE_HEADER_BYTES + 14);
  const compression = bmp.readUInt32LE(FILE_HEADER_BYTES + 16);
  if (compression !== BI_RGB && compression !== BI_BITFIELDS)
    throw new Error(`the BMP is compressed (method ${compression}): only uncompressed BMPs are taken`);
  // At least 16 bits a pixel, so the decode's work stays proportional to the upload: a 1-bit BMP of 2 MB is 16 M
  // pixels, and its decode and PNG encode held the event loop for 2.7 s (red team 7). frame2bmp writes 24 bits.
  if (bitsPerPixel < 16) throw new Error(`the BMP has ${bitsPerPixel} bits a pixel (a palette): only 16, 24 and 32 are taken`);
  const rowBytes = Math.ceil((width * bitsPerPixel) / 32) * 4;
  const pixelsAt = bmp.readUInt32LE(10);
  if (pixelsAt + rowBytes * height > bmp.length) throw new Error(`the BMP is truncated: ${width}x${height} at ${bitsPerPixel} bits needs more bytes`);
  const { decode, PNG } = loadCodecs();
  let image: { width: number; height: number; data: Buffer };
  try {
    image = decode(bmp, { toRGBA: true });
  } catch (e) {
    // The decoder reads past the end of a truncated file with Buffer reads: a RangeError, not a crash.
    throw new Error(`the BMP cannot be decoded: ${e instanceof Error ? e.message : String(e)}`);
  }
  const png = new PNG({ width: image.width, height: Math.abs(image.height) });
  image.data.copy(png.data, 0, 0, Math.min(image.data.length, png.data.length));
  // The decoder's alpha is not the picture's (BMP rarely has one, and it leaves 0 there): opaque, as shown.
  for (let i = 3; i < png.data.length; i += 4) png.data[i] = 0xff;
  return PNG.sync.write(png, { colorType: 2, inputHasAlpha: true });
}
