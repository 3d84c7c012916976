/** NATS helpers shared by the cluster and the NATS-backed store; a leaf, so neither pulls in the other. */

/** A server URL for logs and errors: `nats://user:pass@host` loses its user and password. */
export function withoutUserInfo(server: string): string {
  return server.replace(/^([a-z]+:\/\/)?[^@/]*@/i, '$1');
}
