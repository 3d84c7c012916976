# syntax=docker/dockerfile:1
# Voxgate gateway image. docs/deployment.md ("Containers") explains every choice below;
# gateway/test/containers.test.ts checks this file's facts on every `npm test` (no Docker engine runs there).
ARG NODE_VERSION=24.21

# --- build: every dependency (the TypeScript compiler included), then `npm run build` -> */dist ------------
FROM node:${NODE_VERSION}-bookworm-slim AS build
WORKDIR /src
# Manifests first: the dependency layer is rebuilt only when they change.
COPY package.json package-lock.json tsconfig.base.json tsconfig.build.json ./
COPY protocol/package.json protocol/tsconfig.json protocol/
COPY gateway/package.json gateway/tsconfig.json gateway/
COPY mcp_servers/weather/package.json mcp_servers/weather/tsconfig.build.json mcp_servers/weather/
COPY console/package.json console/tsconfig.json console/vite.config.ts console/index.html console/
RUN npm ci --no-audit --no-fund
COPY protocol/src protocol/src
COPY gateway/src gateway/src
COPY mcp_servers/weather/src mcp_servers/weather/src
COPY console/src console/src
RUN npm run build

# --- runtime: production dependencies + the build, nothing else ---------------------------------------------
FROM node:${NODE_VERSION}-bookworm-slim AS runtime
# tini as PID 1: it forwards SIGTERM/SIGINT to node and reaps orphaned grandchildren (a hosted stdio MCP
# server started through npx or a shell leaves some), which node as PID 1 would not.
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini=0.19.* \
 && rm -rf /var/lib/apt/lists/*
# A fixed numeric id, so an orchestrator's "run as non-root" check can verify it.
RUN groupadd --system --gid 10001 voxgate \
 && useradd --system --uid 10001 --gid voxgate --home-dir /data --shell /usr/sbin/nologin voxgate \
 && mkdir -p /data \
 && chown voxgate:voxgate /data \
 && chmod 0700 /data
WORKDIR /app
# MALLOC_TRIM_THRESHOLD_: as package.json's start sets it (glibc returns freed memory above 128 KiB instead of keeping
# up to 64 MiB per thread arena: docs/performance.md, "mcprss"); containers.test.ts checks the two agree.
ENV NODE_ENV=production \
    GATEWAY_DATA_DIR=/data \
    MALLOC_TRIM_THRESHOLD_=131072
COPY package.json package-lock.json ./
COPY protocol/package.json protocol/
COPY gateway/package.json gateway/
COPY mcp_servers/weather/package.json mcp_servers/weather/
# The console's front-end packages are dev dependencies: its manifest only keeps the workspace list whole.
COPY console/package.json console/
RUN npm ci --omit=dev --no-audit --no-fund \
 && npm cache clean --force
COPY scripts scripts
# The `voxgate` command (voxgate chat): a two-line launcher of the compiled CLI.
COPY gateway/bin gateway/bin
COPY --from=build /src/protocol/dist protocol/dist
COPY --from=build /src/gateway/dist gateway/dist
COPY --from=build /src/mcp_servers/weather/dist mcp_servers/weather/dist
COPY --from=build /src/console/dist console/dist

USER 10001:10001
# Secrets (generated API key, device secret), enrollments and firmware images: keep them across upgrades.
VOLUME ["/data"]
# HTTP API + OTA + device WebSocket; MQTT; MQTT over TLS (with a `tls` config); voice UDP audio.
# 8884/udp is voice.udp.port's default (MQTT devices' audio when voice.mode is "relay", docs/voice.md).
EXPOSE 8000/tcp 1883/tcp 8883/tcp 8884/udp
# Ready = every listener up and not shutting down. Reads the same config (file + GATEWAY_*) as the gateway.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "gateway/dist/cli/healthcheck.js"]
ENTRYPOINT ["/usr/bin/tini", "--"]
# package.json's "start" without npm: one node process that handles SIGTERM itself (graceful stop).
CMD ["node", "--no-allocation-site-pretenuring", "--no-wasm-dynamic-tiering", "--no-wasm-tier-up", "gateway/dist/main.js"]
