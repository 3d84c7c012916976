import { PNG } from 'pngjs';
import { describe, expect, it } from 'vitest';
import { bmpToPng, MAX_BMP_PIXELS } from '../../src/vision/bmp-to-png.js';
import { imageType } from '../../src/vision/image-type.js';
import { bmp24 } from './bmp-fixture.js';

describe('imageType', () => {
  it('tells the five accepted formats by their first bytes, and nothing else', () => {
    expect(imageType(Buffer.from([0xff, 0xd8, 0xff, 0xe0]))).toBe('image/jpeg');
    expect(imageType(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0]))).toBe('image/png');
    expect(imageType(Buffer.from('GIF87a....'))).toBe('image/gif');
    expect(imageType(Buffer.from('RIFF0000WEBPVP8 '))).toBe('image/webp');
    expect(imageType(bmp24(1, 1, () => [0, 0, 0]))).toBe('image/bmp');
    expect(imageType(Buffer.from('<svg/>'))).toBeUndefined();
    expect(imageType(Buffer.alloc(0))).toBeUndefined();
  });
});

describe('bmpToPng', () => {
  it('keeps every pixel, top row first', () => {
    const colour = (x: number, y: number): [number, number, number] => [x * 80, y * 80, 200];
    const png = PNG.sync.read(bmpToPng(bmp24(3, 2, colour)));
    expect([png.width, png.height]).toEqual([3, 2]);
    for (let y = 0; y < 2; y++)
      for (let x = 0; x < 3; x++) {
        const i = (y * 3 + x) * 4;
        expect([png.data[i], png.data[i + 1], png.data[i + 2]]).toEqual(colour(x, y));
      }
  });

  it('refuses a header that asks for more pixels than the cap, before decoding', () => {
    const huge = bmp24(1, 1, () => [0, 0, 0]);
    huge.writeInt32LE(65_536, 18);
    huge.writeInt32LE(-65_536, 22);
    expect(65_536 * 65_536).toBeGreaterThan(MAX_BMP_PIXELS);
    expect(() => bmpToPng(huge)).toThrow(/at most/);
  });

  it('refuses a run-length (RLE) BMP before decoding: 150 KB asked for 16 M pixels and held the event loop for seconds', () => {
    const [w, h] = [4096, 4096];
    const rows: Buffer[] = [];
    for (let y = 0; y < h; y++) {
      const row: number[] = [];
      for (let x = 0; x < w; x += 255) row.push(Math.min(255, w - x), y & 255);
      rows.push(Buffer.from([...row, 0, 0]));
    }
    const pixels = Buffer.concat([...rows, Buffer.from([0, 1])]);
    const header = Buffer.alloc(54 + 1024);
    header.write('BM', 0);
    header.writeUInt32LE(header.length + pixels.length, 2);
    header.writeUInt32LE(header.length, 10);
    header.writeUInt32LE(40, 14);
    header.writeInt32LE(w, 18);
    header.writeInt32LE(h, 22);
    header.writeUInt16LE(1, 26);
    header.writeUInt16LE(8, 28);
    header.writeUInt32LE(1, 30); // BI_RLE8
    header.writeUInt32LE(pixels.length, 34);
    header.writeUInt32LE(256, 46);
    const rle = Buffer.concat([header, pixels]);
    expect(rle.length).toBeLessThan(200_000);
    expect(w * h).toBeLessThanOrEqual(MAX_BMP_PIXELS);
    expect(() => bmpToPng(rle)).toThrow(/compressed/);
    // Uncompressed rows that the file does not hold are refused too, before decoding.
    const short = bmp24(64, 64, () => [1, 2, 3]);
    short.writeInt32LE(4096, 22);
    expect(() => bmpToPng(short)).toThrow(/truncated/);
  });

  it('refuses a BMP of fewer than 16 bits a pixel before decoding: 2 MB at 1 bit is 16 M pixels, seconds of event loop', () => {
    const [w, h] = [4096, 4096];
    const rowBytes = Math.ceil(w / 32) * 4;
    const header = Buffer.alloc(54 + 8);
    header.write('BM', 0);
    header.writeUInt32LE(header.length + rowBytes * h, 2);
    header.writeUInt32LE(header.length, 10);
    header.writeUInt32LE(40, 14);
    header.writeInt32LE(w, 18);
    header.writeInt32LE(h, 22);
    header.writeUInt16LE(1, 26);
    header.writeUInt16LE(1, 28); // 1 bit a pixel, two palette entries
    header.writeUInt32LE(0, 30); // BI_RGB: uncompressed, every row in the file
    header.writeUInt32LE(rowBytes * h, 34);
    header.writeUInt32LE(2, 46);
    const mono = Buffer.concat([header, Buffer.alloc(rowBytes * h, 0x5a)]);
    expect(mono.length).toBeLessThan(2.2 * 1024 * 1024);
    expect(w * h).toBeLessThanOrEqual(MAX_BMP_PIXELS);
    expect(() => bmpToPng(mono)).toThrow(/bits a pixel/);
  });

  it('throws an Error (not a crash) on a truncated file', () => {
    const whole = bmp24(64, 64, () => [1, 2, 3]);
    expect(() => bmpToPng(whole.subarray(0, 100))).toThrow(Error);
    expect(() => bmpToPng(whole.subarray(0, 20))).toThrow(/truncated/);
  });
});
