import { defineConfig } from 'vite';

/**
 * The console is served by the gateway at /console. `npm run dev -w console` serves it with hot reload
 * and proxies the API to a gateway on VOXGATE_URL (default http://127.0.0.1:8000).
 */
const gateway = process.env['VOXGATE_URL'] ?? 'http://127.0.0.1:8000';

export default defineConfig({
  base: '/console/',
  build: { outDir: 'dist', emptyOutDir: true, target: 'es2022', sourcemap: false },
  server: { proxy: { '/v1': gateway, '/healthz': gateway, '/readyz': gateway, '/console/config.json': gateway } },
});
