#!/usr/bin/env node
// The `voxgate` command: the compiled CLI (`npm run build`; `npm start` builds it too), so it runs in a
// runtime install without dev dependencies, like the gateway itself.
await import('../dist/cli/voxgate.js');
