#!/bin/sh
# Build the web console (console/dist, served at /console) when it is missing or older than its sources.
# Vite takes about a second; a runtime install (no dev dependencies) has no Vite: it uses the copied dist/.
set -e
cd "$(dirname "$0")/.."
out=console/dist/index.html
if [ -f "$out" ] && [ -z "$(find console/src console/index.html console/vite.config.ts console/package.json -newer "$out" 2>/dev/null | head -n 1)" ]; then
  exit 0
fi
if [ -x node_modules/.bin/vite ]; then
  exec node_modules/.bin/vite build console --logLevel warn
fi
[ -f "$out" ] && exit 0
echo 'voxgate: the console is not built and Vite is not installed here; /console answers 404 (see docs/console.md)' >&2
