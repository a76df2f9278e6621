import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createConnection } from 'node:net';
import { join } from 'node:path';

function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createConnection({ host: '127.0.0.1', port });
    const done = (ok: boolean) => {
      s.destroy();
      resolve(ok);
    };
    s.setTimeout(1_000, () => done(false));
    s.once('connect', () => done(true));
    s.once('error', () => done(false));
  });
}

async function until(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what} within ${timeoutMs} ms`);
}

/** A free-looking loopback port in a range the machine's own services do not use. */
export function randomPort(): number {
  return 21000 + Math.floor(Math.random() * 20000);
}

/**
 * A server process a test owns (so it can stop and restart it): redis-server with an
 * append-only file, or nats-server with JetStream, on a loopback port, data in `dir`.
 */
export class OwnServer {
  private child: ChildProcess | undefined;
  readonly port: number;
  private readonly kind: 'redis' | 'nats';
  private readonly dir: string;

  constructor(kind: 'redis' | 'nats', dir: string, port = randomPort()) {
    this.kind = kind;
    this.port = port;
    this.dir = join(dir, `${kind}-${port}`);
    mkdirSync(this.dir, { recursive: true });
  }

  get url(): string {
    return this.kind === 'redis' ? `redis://127.0.0.1:${this.port}` : `nats://127.0.0.1:${this.port}`;
  }

  async start(): Promise<this> {
    const args =
      this.kind === 'redis'
        ? ['--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.dir, '--appendonly', 'yes', '--appendfsync', 'always', '--save', '']
        : ['-a', '127.0.0.1', '-p', String(this.port), '-js', '-sd', this.dir];
    this.child = spawn(this.kind === 'redis' ? 'redis-server' : 'nats-server', args, { stdio: 'ignore' });
    await until(() => answers(this.port), 10_000, `${this.kind}-server did not answer on ${this.port}`);
    return this;
  }

  /** Stops the server (SIGTERM: Redis writes its AOF, NATS its store) and waits until the port is closed. */
  async stop(): Promise<void> {
    const c = this.child;
    if (!c || c.exitCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill('SIGTERM');
    await exited;
    await until(async () => !(await answers(this.port)), 10_000, `${this.kind}-server still answers on ${this.port}`);
  }

  async restart(downMs = 0): Promise<void> {
    await this.stop();
    if (downMs > 0) await new Promise((r) => setTimeout(r, downMs));
    await this.start();
  }
}
