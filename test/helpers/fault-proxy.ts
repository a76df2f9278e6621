import { createConnection, createServer, type Server, type Socket } from 'node:net';

/**
 * A fault layer of our own for the tests: a TCP proxy in front of one server, for one link (one
 * service's connections to its Redis or its NATS). Point the service's `REDIS_URL` / `NATS_URL`
 * at {@link FaultProxy.url} and the test can, on that link alone:
 *
 * - {@link hold} it: nothing crosses either way, nothing is lost; {@link heal} lets the held
 *   bytes through, in order (a link that stalls, or a server paused, as seen by this client);
 * - {@link blackhole} it: every byte is dropped and no connection closes (a dead node, a
 *   dropped NAT entry). The connections open then stay dead after {@link heal}; new ones work;
 * - {@link reset} it: every open connection is closed with a TCP RST at once;
 * - {@link delay} it: every chunk waits that long, each way;
 * - start a fault {@link when} a byte pattern (a key, a script name) crosses it: the chunk that
 *   carries the pattern is the first one the fault applies to (held, dropped or cut with it).
 *
 * Bytes are forwarded as they come, in order per direction; there is no back-pressure (test
 * traffic is small).
 */
export class FaultProxy {
  private readonly server: Server;
  private readonly links = new Set<Link>();
  private mode: 'pass' | 'hold' | 'blackhole' = 'pass';
  private delayMs = 0;
  private triggers: Trigger[] = [];
  /** Connections accepted so far. */
  accepted = 0;
  /** Bytes forwarded so far, client → server (`up`) and server → client (`down`). */
  readonly bytes = { up: 0, down: 0 };
  port = 0;

  private constructor(
    private readonly upstream: { host: string; port: number },
    readonly name: string,
  ) {
    this.server = createServer((client) => this.accept(client));
  }

  /** Starts a proxy to `upstream` (`redis://host:port`, `nats://host:port`, or host and port) on a free loopback port. */
  static async start(upstream: string | { host: string; port: number }, name = 'link'): Promise<FaultProxy> {
    const target = typeof upstream === 'string' ? hostPort(upstream) : upstream;
    const proxy = new FaultProxy(target, name);
    await new Promise<void>((resolve, reject) => {
      proxy.server.once('error', reject);
      proxy.server.listen(0, '127.0.0.1', () => resolve());
    });
    const address = proxy.server.address();
    proxy.port = typeof address === 'object' && address ? address.port : 0;
    return proxy;
  }

  /** The proxy's URL with `scheme` (`redis`, `nats`). */
  url(scheme: string): string {
    return `${scheme}://127.0.0.1:${this.port}`;
  }

  /** Connections open now. */
  get open(): number {
    return this.links.size;
  }

  /** The fault under way: `pass` when the link is healthy. */
  get fault(): string {
    return this.mode === 'pass' && this.delayMs > 0 ? `delay ${this.delayMs} ms` : this.mode;
  }

  /** Stops every byte on the link, both ways, keeping them for {@link heal}. */
  hold(): void {
    this.mode = 'hold';
  }

  /** Drops every byte on the link, both ways, from now on; the connections open meanwhile never carry anything again. */
  blackhole(): void {
    this.mode = 'blackhole';
    for (const link of this.links) link.dead = true;
  }

  /** Closes every open connection with a TCP RST. */
  reset(): void {
    for (const link of [...this.links]) link.reset();
  }

  /** Delays every chunk by `ms`, each way (0 ends it). */
  delay(ms: number): void {
    this.delayMs = ms;
  }

  /** Ends a hold (the held bytes go through, in order), a blackhole (for new connections) and a delay. */
  heal(): void {
    this.mode = 'pass';
    this.delayMs = 0;
    for (const link of this.links) link.pump();
  }

  /**
   * Runs `fault` (for example `() => proxy.hold()`) the moment `pattern` crosses the link
   * (`up`: client to server, the default; `down`; or `both`), at its `nth` crossing (default the
   * first); the chunk that carries it is then routed by the fault. Resolves when it has happened.
   */
  when(pattern: string | Buffer, fault: () => void, options: { direction?: 'up' | 'down' | 'both'; nth?: number } = {}): Promise<void> {
    return new Promise((resolve) => {
      this.triggers.push({
        pattern: Buffer.isBuffer(pattern) ? pattern : Buffer.from(pattern),
        direction: options.direction ?? 'up',
        left: options.nth ?? 1,
        fire: () => {
          fault();
          resolve();
        },
      });
    });
  }

  /** Stops listening and closes every connection. */
  async close(): Promise<void> {
    for (const link of [...this.links]) link.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    this.accepted++;
    const link = new Link(this, client, this.mode === 'blackhole' ? undefined : createConnection(this.upstream));
    if (this.mode === 'blackhole') link.dead = true;
    this.links.add(link);
    link.onClose = () => this.links.delete(link);
  }

  /** A chunk crossed the link: fires the triggers it matches (`seen` holds its tail and it), then says how to route it. */
  route(direction: 'up' | 'down', seen: Buffer): { mode: 'pass' | 'hold' | 'blackhole'; delayMs: number } {
    for (const t of this.triggers) {
      if (t.direction !== 'both' && t.direction !== direction) continue;
      if (seen.includes(t.pattern) && --t.left === 0) {
        this.triggers = this.triggers.filter((x) => x !== t);
        t.fire();
      }
    }
    return { mode: this.mode, delayMs: this.delayMs };
  }

  /** The longest pattern waited for, less one: how much of a chunk's end a link keeps to find a pattern cut in two. */
  tailLength(): number {
    return Math.max(0, ...this.triggers.map((t) => t.pattern.length - 1));
  }

  countBytes(direction: 'up' | 'down', n: number): void {
    this.bytes[direction] += n;
  }
}

interface Trigger {
  pattern: Buffer;
  direction: 'up' | 'down' | 'both';
  left: number;
  fire: () => void;
}

/** One proxied connection: a client socket, its server socket, and a queue of chunks per direction. */
class Link {
  /** Blackholed: nothing it carries is ever delivered. */
  dead = false;
  onClose: () => void = () => undefined;
  private readonly queues: Record<'up' | 'down', { chunk: Buffer; at: number }[]> = { up: [], down: [] };
  private readonly tails: Record<'up' | 'down', Buffer> = { up: Buffer.alloc(0), down: Buffer.alloc(0) };
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly proxy: FaultProxy,
    private readonly client: Socket,
    private readonly server: Socket | undefined,
  ) {
    client.on('data', (chunk: Buffer) => this.take('up', chunk));
    server?.on('data', (chunk: Buffer) => this.take('down', chunk));
    for (const s of [client, server]) {
      s?.on('error', () => this.destroy());
      s?.on('close', () => this.destroy());
    }
  }

  private take(direction: 'up' | 'down', chunk: Buffer): void {
    const seen = Buffer.concat([this.tails[direction], chunk]);
    const keep = this.proxy.tailLength();
    this.tails[direction] = keep > 0 ? seen.subarray(Math.max(0, seen.length - keep)) : Buffer.alloc(0);
    const { mode, delayMs } = this.proxy.route(direction, seen);
    if (mode === 'blackhole') this.dead = true;
    if (this.dead) return;
    this.queues[direction].push({ chunk, at: Date.now() + delayMs });
    this.pump();
  }

  /** Writes every chunk that is due, in order, unless the link is held; waits for the next due one. */
  pump(): void {
    clearTimeout(this.timer);
    // Held: everything queued waits for heal(), which pumps again.
    if (this.closed || this.proxy.fault === 'hold') return;
    let next = Infinity;
    for (const direction of ['up', 'down'] as const) {
      const q = this.queues[direction];
      const to = direction === 'up' ? this.server : this.client;
      while (q.length > 0) {
        const item = q[0]!;
        if (item.at > Date.now()) {
          next = Math.min(next, item.at);
          break;
        }
        q.shift();
        this.proxy.countBytes(direction, item.chunk.length);
        to?.write(item.chunk);
      }
    }
    if (next !== Infinity) this.timer = setTimeout(() => this.pump(), next - Date.now());
  }

  reset(): void {
    this.closed = true;
    this.client.resetAndDestroy();
    this.server?.resetAndDestroy();
    this.onClose();
  }

  destroy(): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.timer);
    this.client.destroy();
    this.server?.destroy();
    this.onClose();
  }
}

/** Host and port of `redis://…` or `nats://…` (the first server of a list). */
function hostPort(url: string): { host: string; port: number } {
  const u = new URL(url.split(',')[0]!);
  return { host: u.hostname || '127.0.0.1', port: Number(u.port || (u.protocol.startsWith('redis') ? 6379 : 4222)) };
}
