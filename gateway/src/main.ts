import { ConfigError, loadConfig, type Config } from './config.js';
import { startGateway, type Gateway } from './gateway.js';
import { createLogger } from './log.js';
import { installSafetyNet } from './safety-net.js';

/**
 * CLI entry (`node gateway/dist/main.js`, or `npm start`, which execs it): one process
 * that receives its signals itself. Configuration problems exit 2; SIGINT, SIGTERM or SIGHUP (the terminal
 * closed) stops gracefully (exit 0), a second SIGINT/SIGTERM or an overrun of the grace period exits 1;
 * SIGUSR2 rereads the TLS files. Errors no handler caught: see safety-net.ts.
 */
async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`voxgate: ${e.message}\n`);
      process.exit(2);
    }
    throw e;
  }

  // Listen before starting: a signal that arrives during start stops the gateway as soon as it is up,
  // so nothing it started (listeners, hub children) outlives the process.
  let gw: Gateway | undefined = undefined;
  let signal: string | undefined;
  let exitCode = 0;
  const stop = (name: string, code = 0) => {
    if (signal !== undefined) {
      // A closed terminal delivers SIGHUP more than once (the kernel to the session leader, the shell to
      // its jobs, the kernel again to the foreground group): only an impatient SIGINT/SIGTERM cuts the stop short.
      if (name === 'SIGHUP') return;
      process.exit(1);
    }
    signal = name;
    exitCode = code;
    if (gw) shutDown(gw, config, name, code);
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  // The terminal hung up (SSH drop, closed window): stop as SIGINT does, or the gateway lives on with
  // PPID 1, holding the ports and the store, and the next start fails.
  process.on('SIGHUP', () => stop('SIGHUP'));
  // SIGUSR2 rereads what can change under a running gateway: the TLS certificate, key and CA (after a
  // renewal), without dropping a connection. One during start is ignored: start reads them.
  process.on('SIGUSR2', () => {
    if (!gw || signal !== undefined) return;
    gw.log.info({ signal: 'SIGUSR2' }, 'signal received: rereading the TLS files');
    gw.reloadTls();
  });
  const log = createLogger(config.logLevel, undefined, config.logFormat);
  installSafetyNet({ log, count: (kind) => gw?.metrics.unhandledErrors.inc({ kind }), onException: () => stop('uncaughtException', 1) });

  gw = await startGateway(config, { log });
  if (gw.generatedApiKey) {
    // Printed once, outside the (redacted) log: it is also kept in <dataDir>/secrets.json (mode 0600).
    process.stderr.write(`\n  No GATEWAY_API_KEYS configured; generated an API key (kept in ${config.dataDir}/secrets.json):\n\n    ${gw.generatedApiKey}\n\n`);
  }
  if (signal !== undefined) shutDown(gw, config, signal, exitCode);
}

function shutDown(gw: Gateway, config: Config, signal: string, exitCode: number): void {
  if (exitCode === 0) gw.log.info({ signal }, 'signal received');
  else gw.log.error({ reason: signal }, 'stopping after an uncaught exception');
  // close() bounds connections by shutdownGraceMs and hub children by mcp.killGraceMs (TERM, then KILL,
  // then a bounded wait for the group); past both, something is stuck: exit anyway.
  const hardStop = setTimeout(
    () => {
      gw.log.error({ signal }, 'shutdown overran its grace period; exiting');
      process.exit(1);
    },
    config.shutdownGraceMs + 2 * config.mcp.killGraceMs + 1000,
  );
  hardStop.unref();
  void gw.close().then(
    () => process.exit(exitCode),
    (err: unknown) => {
      gw.log.error({ err }, 'shutdown failed');
      process.exit(1);
    },
  );
}

main().catch((e: unknown) => {
  process.stderr.write(`voxgate: failed to start: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
