/**
 * The demo's operator console (`cli/dist/bundle/console.js`, one more process of the demo): on port 8092
 * when it is free (else a free port; BOSUN_CONSOLE_PORT chooses), with BOSUN_CONSOLE_TOKEN as its
 * token, or a random one for this demo, which the demo prints.
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { CONSOLE_PORT, CONSOLE_TOKEN_ENV } from './console/process.js';
import { freePort } from './demo-alert.js';

/** The console of a demo: where it listens, its token, and its process for the demo's launcher. */
export interface DemoConsole {
  url: string;
  token: string;
  /** `[name, script, args]` for the launcher. */
  service: readonly [string, string, readonly string[]];
}

/** Whether 127.0.0.1:port can be listened on now. */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/** Chooses the console's port and token (setting BOSUN_CONSOLE_TOKEN for the process it starts). */
export async function prepareDemoConsole(): Promise<DemoConsole> {
  const asked = process.env.BOSUN_CONSOLE_PORT;
  const port = asked ? Number(asked) : (await portFree(CONSOLE_PORT)) ? CONSOLE_PORT : await freePort();
  const token = process.env[CONSOLE_TOKEN_ENV] || `demo-${randomBytes(12).toString('hex')}`;
  process.env[CONSOLE_TOKEN_ENV] = token;
  return { url: `http://127.0.0.1:${port}/`, token, service: ['console', 'cli/dist/bundle/console.js', ['--port', String(port)]] };
}
