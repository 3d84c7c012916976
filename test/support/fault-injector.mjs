// Loaded into a gateway process by tests (`node --import <this file> gateway/dist/main.js`), never by the
// gateway itself: on SIGWINCH (a signal the gateway leaves alone) it raises the fault VOXGATE_TEST_FAULT names, from outside any handler, as a
// bug in the gateway would. `rejection`: a promise rejected with no handler. `exception`: a synchronous throw.
process.on('SIGWINCH', () => {
  if (process.env.VOXGATE_TEST_FAULT === 'exception') {
    setImmediate(() => {
      throw new Error('injected uncaught exception');
    });
  } else {
    void Promise.reject(new Error('injected unhandled rejection'));
  }
});
