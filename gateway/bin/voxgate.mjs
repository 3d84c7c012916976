#!/usr/bin/env node
// The `voxgate` command: runs the TypeScript CLI through tsx's loader (as `npm start` runs the gateway).
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/voxgate.ts');
