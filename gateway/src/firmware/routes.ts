import { createReadStream } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import { GatewayError } from '../errors.js';
import { sourceKey } from '../throttle/source-key.js';
import { REFUSAL_LINES, ThrottledLog } from '../throttle/throttled-log.js';
import { isSafeImageName } from './images.js';
import type { FirmwareService } from './service.js';

export interface FirmwareRoutesOptions {
  firmware: FirmwareService;
  /** Downloads in flight per client address, and in all; more is 429 (an image is megabytes). */
  maxPerAddress: number;
  maxTotal: number;
}

/**
 * `GET /firmware/{file}`: the images in <dataDir>/firmware, for devices to download. No API key: the
 * reference firmware downloads the offered URL as is. Content-Length always; `Repr-Digest` (RFC 9530)
 * with the SHA-256 the OTA answer also carries. No Range: a device restarts a failed download.
 */
export async function firmwareRoutes(app: FastifyInstance, o: FirmwareRoutesOptions): Promise<void> {
  const { maxPerAddress, maxTotal } = o;
  const active = new Map<string, number>();
  let total = 0;
  // No key is asked for a download: a refusal takes one request to cause, so its lines are bounded (the metric counts all).
  const refusals = new ThrottledLog(app.log, 'warn', REFUSAL_LINES);

  app.get<{ Params: { file: string } }>('/firmware/:file', {
    schema: {
      tags: ['ota'],
      summary: 'Download a firmware image (from <dataDir>/firmware)',
      params: { type: 'object', properties: { file: { type: 'string', maxLength: 128 } }, required: ['file'] },
    },
    handler: async (req, reply) => {
      const name = req.params.file;
      if (!isSafeImageName(name)) {
        o.firmware.downloads.inc({ outcome: 'bad_name' });
        throw new GatewayError('INVALID_REQUEST', 'a firmware file name is letters, digits, ".", "_" and "-" (no path)');
      }
      const info = await o.firmware.images.info(name);
      if (!info) {
        o.firmware.downloads.inc({ outcome: 'not_found' });
        throw new GatewayError('NOT_FOUND', `no firmware image "${name}"`);
      }
      // Per source as the connection limits count (an IPv6 /64 is one): per address, one host took every slot.
      const source = sourceKey(req.ip);
      const mine = active.get(source) ?? 0;
      if (mine >= maxPerAddress || total >= maxTotal) {
        o.firmware.downloads.inc({ outcome: 'busy' });
        refusals.write({ file: name, perAddress: mine, total, remote: req.ip }, 'firmware download refused: too many at once', 'busy');
        throw new GatewayError('RATE_LIMITED', 'too many firmware downloads in progress; retry later');
      }
      active.set(source, mine + 1);
      total++;
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        total--;
        const n = (active.get(source) ?? 1) - 1;
        if (n <= 0) active.delete(source);
        else active.set(source, n);
      };
      reply.raw.once('close', release);
      o.firmware.downloads.inc({ outcome: req.method === 'HEAD' ? 'head' : 'served' });
      req.log.info({ file: name, size: info.size }, 'firmware download');
      return (
        reply
          .header('content-type', 'application/octet-stream')
          .header('content-length', info.size)
          .header('repr-digest', `sha-256=:${Buffer.from(info.sha256, 'hex').toString('base64')}:`)
          .header('cache-control', 'no-cache')
          // For HEAD, fastify destroys the stream unread and keeps the headers.
          .send(createReadStream(info.path).on('error', release))
      );
    },
  });
}
