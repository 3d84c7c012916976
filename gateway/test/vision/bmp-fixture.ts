/** A 24-bit, bottom-up, uncompressed BMP (what the ESP32 camera driver's frame2bmp writes), built byte by byte. */
export function bmp24(width: number, height: number, pixel: (x: number, y: number) => [number, number, number]): Buffer {
  const rowBytes = Math.ceil((width * 3) / 4) * 4;
  const header = Buffer.alloc(54);
  header.write('BM', 0, 'latin1');
  header.writeUInt32LE(54 + rowBytes * height, 2);
  header.writeUInt32LE(54, 10);
  header.writeUInt32LE(40, 14);
  header.writeInt32LE(width, 18);
  header.writeInt32LE(height, 22);
  header.writeUInt16LE(1, 26);
  header.writeUInt16LE(24, 28);
  header.writeUInt32LE(rowBytes * height, 34);
  const rows = Buffer.alloc(rowBytes * height);
  for (let y = 0; y < height; y++) {
    // Bottom-up: the file's first row is the picture's last.
    const row = (height - 1 - y) * rowBytes;
    for (let x = 0; x < width; x++) {
      const [r, g, b] = pixel(x, y);
      rows[row + x * 3] = b;
      rows[row + x * 3 + 1] = g;
      rows[row + x * 3 + 2] = r;
    }
  }
  return Buffer.concat([header, rows]);
}
