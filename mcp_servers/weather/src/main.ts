#!/usr/bin/env node
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { createWeatherServer, optionsFromEnv } from './server.js';

/** stdio entry: `JMA_BASE_URL` (default https://www.jma.go.jp), `JMA_TIMEOUT_MS`, and `JMA_DATA_DIR` (offline: saved forecasts) configure it. */
const options = optionsFromEnv();
serveStdio(() => createWeatherServer(options));
process.on('SIGTERM', () => process.exit(0));
