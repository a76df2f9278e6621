import type { StandaloneCommand } from '../command.js';

/**
 * `bosun serve [--only <names>] [--check]`: the coordinator, the specialists and the tool gateway
 * in one process (docs/scaling.md, "Layouts"). A process of its own, as the services are: it reads
 * the environment itself, prints the ready line, and stops on SIGTERM.
 */
export const serveCommand: StandaloneCommand = {
  name: 'serve',
  usage: '  bosun serve [--only <names>]      run coordinator, specialists and tool gateway in one process (--check: check only)',
  standalone: true,
  parse(args) {
    // Imported when asked for: it brings in every service's code, which no other command needs.
    return async () => (await import('../serve.js')).runServe(args);
  },
};
