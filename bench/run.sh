#!/usr/bin/env bash
# Raise the open-file limit as far as this machine allows (children inherit it), then run the bench.
# Raising the hard limit needs CAP_SYS_RESOURCE; without it the soft limit goes up to the hard one.
ulimit -Hn 1048576 2>/dev/null || true
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
cd "$(dirname "$0")/.." || exit 1
exec node --conditions=voxgate-source --import tsx bench/run.ts "$@"
