#!/bin/sh
# Run by `npm start` before the gateway. The console first (scripts/build-console-if-needed.sh: only when
# stale). With TypeScript installed, build: `tsc -b` is incremental and takes about a second when dist/
# is up to date. In a runtime install (`npm ci --omit=dev`) there is no compiler: start the build that
# was copied in, or say how to make one.
set -e
cd "$(dirname "$0")/.."
sh scripts/build-console-if-needed.sh
if [ -x node_modules/.bin/tsc ]; then
  exec node_modules/.bin/tsc -b tsconfig.build.json
fi
[ -f gateway/dist/main.js ] && exit 0
echo 'voxgate: gateway/dist/main.js is missing and TypeScript is not installed here (a runtime install):' >&2
echo '  run "npm run build" where dev dependencies are installed and copy the dist/ folders, see docs/deployment.md' >&2
exit 1
