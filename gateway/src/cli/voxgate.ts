import { parseArgs } from 'node:util';
import { runChat } from './chat.js';

/** The `voxgate` command. */
const USAGE = `usage: voxgate chat [--url URL] [--key KEY] [--model NAME] [--device ID] [-m MESSAGE]
  --url     the gateway (default $VOXGATE_URL or http://127.0.0.1:8000)
  --key     an API key (default $VOXGATE_KEY)
  -m        answer one message and exit (exit code 1 when the turn fails)`;

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (cmd !== 'chat') {
    process.stderr.write(`${USAGE}\n`);
    return cmd === undefined || cmd === '--help' || cmd === '-h' ? 0 : 2;
  }
  let values;
  try {
    ({ values } = parseArgs({
      args: rest,
      options: {
        url: { type: 'string' },
        key: { type: 'string' },
        model: { type: 'string' },
        device: { type: 'string' },
        message: { type: 'string', short: 'm' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (e) {
    process.stderr.write(`voxgate: ${(e as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (values.help) {
    process.stderr.write(`${USAGE}\n`);
    return 0;
  }
  return runChat({
    url: values.url ?? process.env['VOXGATE_URL'] ?? 'http://127.0.0.1:8000',
    key: values.key ?? process.env['VOXGATE_KEY'],
    model: values.model,
    device: values.device,
    message: values.message,
    input: process.stdin,
    output: process.stdout,
    errors: process.stderr,
    interactive: Boolean(process.stdin.isTTY && process.stdout.isTTY),
  });
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`voxgate: ${(e as Error).message}\n`);
    process.exit(1);
  },
);
