import { parseCommand } from '../args.js';
import type { StandaloneCommand } from '../command.js';

/**
 * `bosun demo [--once]`: a demo cluster with sample incidents. It reads the environment itself
 * when it starts (and may start Redis and NATS), so `main` does not read it first.
 */
export const demoCommand: StandaloneCommand = {
  name: 'demo',
  usage: '  bosun demo [--once]               start a demo cluster and publish sample incidents',
  standalone: true,
  parse(args) {
    const { values } = parseCommand('demo', args, { once: { type: 'boolean', default: false } }, 0);
    // Imported when asked for: the demo brings in every service's code, which no other command
    // needs, and each `bosun` call would pay for loading it.
    return async () => (await import('../demo.js')).runDemo({ once: values.once });
  },
};
