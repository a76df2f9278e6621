import { parseCommand } from '../args.js';
import type { StandaloneCommand } from '../command.js';
import { runDemo } from '../demo.js';

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
    return () => runDemo({ once: values.once });
  },
};
