import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { commandLine, descendants, isolatedEnv, portIsFree, ROOT } from '../../../test/support/gateway-process.js';
import { isAlive } from '../../../test/support/hub.js';
import { once, until } from '../../../test/support/wait.js';

/**
 * `npm start` in a real pseudo-terminal (util-linux `script` gives it one), then the terminal hangs up
 * as an SSH drop or a closed window does: `script` is killed, its pty master closes, and the kernel sends
 * SIGHUP to the session (npm), then to the foreground group (the gateway) when npm is gone. The gateway
 * must stop gracefully, not live on with PPID 1 holding the ports and the store, and not spin on writing
 * its log to the dead terminal.
 */
describe('a terminal that hangs up', () => {
  for (const format of ['json', 'pretty'] as const) {
    it(`stops \`npm start\`'s gateway cleanly (${format} log)`, async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-hup-'));
      writeFileSync(join(dataDir, 'gateway.config.json'), '{}');
      const env = { ...process.env, TERM: 'dumb', ...isolatedEnv(dataDir, { GATEWAY_API_KEYS: 'hangup-test-key', GATEWAY_LOG_FORMAT: format }) };
      const term = spawn('script', ['-qfec', 'npm start --silent', '/dev/null'], { cwd: ROOT, env, stdio: 'pipe' });
      let screen = '';
      term.stdout.on('data', (d: Buffer) => (screen += d.toString()));
      let gateway: number | undefined;
      try {
        await until(() => /voxgate started/.test(screen), 'the gateway to start', 90_000);
        gateway = descendants(term.pid!).find((pid) => commandLine(pid).includes('gateway/dist/main.js'));
        expect(gateway).toBeDefined();
        const httpPort = Number(/Server listening at http:\/\/127\.0\.0\.1:(\d+)/.exec(screen)?.[1]);
        expect(httpPort).toBeGreaterThan(0);
        expect(existsSync(join(dataDir, 'voxgate.db-wal'))).toBe(true);

        term.kill('SIGKILL');
        await once(term, 'exit');
        await until(() => !isAlive(gateway!), 'the gateway to exit after the hang-up', 30_000);
        expect(await portIsFree(httpPort)).toBe(true);
        // A clean close checkpoints and removes the write-ahead log; a killed or stuck gateway leaves it.
        expect(existsSync(join(dataDir, 'voxgate.db-wal'))).toBe(false);
      } finally {
        term.kill('SIGKILL');
        if (gateway !== undefined && isAlive(gateway)) process.kill(gateway, 'SIGKILL');
        rmSync(dataDir, { recursive: true, force: true });
      }
    }, 120_000);
  }
});
