export * from './binary.js';
export * from './udp.js';
export * from './hello.js';
