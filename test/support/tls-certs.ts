import { execFileSync } from 'node:child_process';
import { randomBytes, X509Certificate } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { request as httpsRequestRaw } from 'node:https';
import { join } from 'node:path';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';

/** A PEM certificate and its key, as files (what `tls.certFile` / `tls.keyFile` point at). */
export interface IssuedCertificate {
  certFile: string;
  keyFile: string;
  /** SHA-256 fingerprint in node's `AA:BB:…` form (what `getPeerCertificate().fingerprint256` reports). */
  fingerprint256: string;
}

export interface TestPki {
  /** The trust anchor clients are given. */
  rootFile: string;
  root: Buffer;
  /** The intermediate CA that signs the leaves: what `tls.caFile` adds to a leaf-only certFile. */
  intermediateFile: string;
  /** Issue a server certificate for 127.0.0.1 and localhost, signed by the intermediate. */
  issue(name: string): IssuedCertificate;
}

const CA_EXT = 'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n';
const LEAF_EXT = 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n';

function openssl(args: string[]): void {
  execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

/** A key pair and a CSR (P-256: fast to generate on a busy machine). */
function keyAndRequest(dir: string, name: string): { key: string; csr: string } {
  const key = join(dir, `${name}.key`);
  const csr = join(dir, `${name}.csr`);
  openssl(['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', csr, '-subj', `/CN=${name}`]);
  return { key, csr };
}

function sign(dir: string, name: string, csr: string, ext: string, issuer: { cert: string; key: string } | { selfKey: string }): string {
  const cert = join(dir, `${name}.pem`);
  const extFile = join(dir, `${name}.ext`);
  writeFileSync(extFile, ext);
  const by = 'selfKey' in issuer ? ['-signkey', issuer.selfKey] : ['-CA', issuer.cert, '-CAkey', issuer.key];
  openssl(['x509', '-req', '-in', csr, ...by, '-set_serial', `0x${randomBytes(8).toString('hex')}`, '-days', '2', '-extfile', extFile, '-out', cert]);
  return cert;
}

/** Root → intermediate → leaves, made with the openssl CLI in `dir` at test time (nothing checked in). */
export function createTestPki(dir: string): TestPki {
  const root = keyAndRequest(dir, 'voxgate-test-root');
  const rootFile = sign(dir, 'voxgate-test-root', root.csr, CA_EXT, { selfKey: root.key });
  const mid = keyAndRequest(dir, 'voxgate-test-intermediate');
  const intermediateFile = sign(dir, 'voxgate-test-intermediate', mid.csr, CA_EXT, { cert: rootFile, key: root.key });
  return {
    rootFile,
    root: readFileSync(rootFile),
    intermediateFile,
    issue(name) {
      const leaf = keyAndRequest(dir, name);
      const certFile = sign(dir, name, leaf.csr, LEAF_EXT, { cert: intermediateFile, key: mid.key });
      return { certFile, keyFile: leaf.key, fingerprint256: new X509Certificate(readFileSync(certFile)).fingerprint256 };
    },
  };
}

export interface HttpsAnswer {
  status: number;
  body: string;
  /** The certificate the server presented on this (fresh) connection. */
  fingerprint256: string;
}

/** One request on its own TLS connection (no agent: a reused socket would hide a certificate change). */
export function httpsRequest(
  port: number,
  path: string,
  opts: { ca: Buffer; method?: string; headers?: Record<string, string>; body?: string },
): Promise<HttpsAnswer> {
  return new Promise((resolve, reject) => {
    const req = httpsRequestRaw(
      { host: '127.0.0.1', port, path, method: opts.method ?? 'GET', headers: opts.headers ?? {}, ca: opts.ca, agent: false },
      (res) => {
        const fingerprint256 = (res.socket as TLSSocket).getPeerCertificate().fingerprint256;
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, fingerprint256 }));
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** The certificate a TLS listener presents to a new connection (verified against `ca`). */
export function presentedFingerprint(port: number, ca: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: '127.0.0.1', port, ca }, () => {
      resolve(socket.getPeerCertificate().fingerprint256);
      socket.destroy();
    });
    socket.on('error', reject);
  });
}
