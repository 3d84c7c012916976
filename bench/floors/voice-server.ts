/**
 * The voice server for the relayed-audio bench: the tests' voice-server double (test/support/voice-server.ts),
 * which answers the hello and echoes every binary frame unchanged, here without recording what it echoes.
 * The gateway relays devices to it, and the floor's devices connect to it directly: one echo for both.
 */
import { VoiceServerDouble } from '../../test/support/voice-server.js';
import { serveMemoryProbe } from '../procs/ipc.js';

const server = await VoiceServerDouble.start({ recordAudio: false });
serveMemoryProbe(() => ({ devices: server.openCount }));
process.send?.({ id: 0, ok: true, url: server.url });
