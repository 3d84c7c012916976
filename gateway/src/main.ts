import { ConfigError, loadConfig } from './config.js';
import { startGateway } from './gateway.js';

/** CLI entry: configuration problems exit 2; SIGINT/SIGTERM stop gracefully within the grace period. */
async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`voxgate: ${e.message}\n`);
      process.exit(2);
    }
    throw e;
  }
  const gw = await startGateway(config);
  if (gw.generatedApiKey) {
    // Printed once, outside the (redacted) log: it is also kept in <dataDir>/secrets.json (mode 0600).
    process.stderr.write(
      `\n  No GATEWAY_API_KEYS configured; generated an API key (kept in ${config.dataDir}/secrets.json):\n\n    ${gw.generatedApiKey}\n\n`,
    );
  }
  let signals = 0;
  const stop = (signal: string) => {
    if (++signals > 1) process.exit(1);
    gw.log.info({ signal }, 'signal received');
    const hardStop = setTimeout(() => process.exit(1), 5000);
    hardStop.unref();
    void gw.close().then(() => process.exit(0));
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

main().catch((e: unknown) => {
  process.stderr.write(`voxgate: failed to start: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
