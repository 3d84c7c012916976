import { readFileSync } from 'node:fs';
import { X509Certificate } from 'node:crypto';
import { createSecureContext, type SecureContextOptions, type Server as TlsServer } from 'node:tls';
import type { Logger } from 'pino';
import type { Metrics } from '../metrics.js';

export interface TlsFiles {
  certFile: string;
  keyFile: string;
  caFile?: string | undefined;
}

/** What an operator needs to recognise a certificate in a log line (never the key). */
export interface CertificateSummary {
  subject: string;
  issuer: string;
  validTo: string;
  fingerprint256: string;
}

/**
 * Reads the PEM files and proves they make a usable context (the key matches the certificate, the PEM
 * parses) before anyone is served them; throws with the file at fault, never its content.
 */
export function loadTlsFiles(files: TlsFiles): { options: SecureContextOptions; summary: CertificateSummary } {
  const read = (what: string, path: string) => {
    try {
      return readFileSync(path);
    } catch (e) {
      throw new Error(`${what} ${path}: ${(e as NodeJS.ErrnoException).code ?? 'unreadable'}`);
    }
  };
  const options: SecureContextOptions = { cert: read('tls.certFile', files.certFile), key: read('tls.keyFile', files.keyFile) };
  if (files.caFile !== undefined) options.ca = read('tls.caFile', files.caFile);
  let summary: CertificateSummary;
  try {
    const leaf = new X509Certificate(options.cert as Buffer);
    summary = {
      subject: leaf.subject.replace(/\n/g, ', '),
      issuer: leaf.issuer.replace(/\n/g, ', '),
      validTo: leaf.validTo,
      fingerprint256: leaf.fingerprint256,
    };
  } catch {
    throw new Error(`tls.certFile ${files.certFile}: not a PEM certificate`);
  }
  try {
    createSecureContext(options);
  } catch (e) {
    // OpenSSL's reason (e.g. "key values mismatch") names no secret.
    throw new Error(`tls.certFile/keyFile/caFile do not make a usable TLS context: ${(e as Error).message}`);
  }
  return { options, summary };
}

/**
 * The certificate every TLS listener serves. `reload()` rereads the files and swaps them into each
 * listener with `setSecureContext`: open connections keep the session they negotiated, new ones get the
 * new certificate. A new set that does not load leaves the old one in place.
 */
export class TlsCertificates {
  private readonly servers = new Set<TlsServer>();
  private current: { options: SecureContextOptions; summary: CertificateSummary };

  constructor(
    private readonly files: TlsFiles,
    private readonly log: Logger,
    private readonly metrics: Metrics,
  ) {
    this.current = loadTlsFiles(files);
    this.observe();
    log.info({ certificate: this.current.summary }, 'TLS certificate loaded');
  }

  /** Options for a new listener (certificate, key, chain). */
  get options(): SecureContextOptions {
    return this.current.options;
  }

  get summary(): CertificateSummary {
    return this.current.summary;
  }

  /** Listeners that take part in reloads. */
  serve(server: TlsServer): void {
    this.servers.add(server);
    server.once('close', () => this.servers.delete(server));
  }

  /** Reread the files (SIGUSR2). True when the new certificate is now served. */
  reload(): boolean {
    let next: { options: SecureContextOptions; summary: CertificateSummary };
    try {
      next = loadTlsFiles(this.files);
    } catch (e) {
      this.metrics.tlsReloads.inc({ outcome: 'failed' });
      this.log.error({ err: (e as Error).message, certificate: this.current.summary }, 'TLS reload failed; still serving the previous certificate');
      return false;
    }
    for (const s of this.servers) s.setSecureContext(next.options);
    this.current = next;
    this.observe();
    this.metrics.tlsReloads.inc({ outcome: 'ok' });
    this.log.info({ certificate: next.summary, listeners: this.servers.size }, 'TLS certificate reloaded');
    return true;
  }

  private observe(): void {
    this.metrics.tlsCertificateExpiry.set(Math.floor(Date.parse(this.current.summary.validTo) / 1000));
  }
}
