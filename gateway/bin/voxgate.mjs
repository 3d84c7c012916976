#!/usr/bin/env node
// The `voxgate` command: the compiled CLI (`npm run build`; `npm start` builds it too), so it runs in a
// runtime install without dev dependencies, like the gateway itself.
try {
  await import('../dist/cli/voxgate.js');
} catch (e) {
  // Before the first build there is no dist/: say what to do instead of printing a module-not-found stack.
  if (e?.code !== 'ERR_MODULE_NOT_FOUND' || !String(e.message).includes('dist/cli/voxgate.js')) throw e;
  process.stderr.write('voxgate: the gateway is not built yet. Run `npm run build` (or `npm start`, which builds it) first.\n');
  process.exit(1);
}
