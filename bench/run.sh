#!/usr/bin/env bash
# Raise the open-file limit as far as this machine allows (children inherit it), then run the bench.
# Raising the hard limit needs CAP_SYS_RESOURCE; without it the soft limit goes up to the hard one.
ulimit -Hn 1048576 2>/dev/null || true
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
cd "$(dirname "$0")/.." || exit 1
# The bench measures the gateway as `npm start` runs it: compiled. tsc -b rebuilds only what is stale (about 2 s when
# nothing is); if the build fails the bench says so and runs the gateway from its sources through tsx instead.
npx tsc -b tsconfig.build.json || echo "bench: the build failed; the gateway will run from its sources through tsx" >&2
exec node --conditions=voxgate-source --import tsx bench/run.ts "$@"
