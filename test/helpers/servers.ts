import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { join } from 'node:path';
import { reap } from './reaper.js';
import { waitUntil } from './wait.js';

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

/** A loopback port the OS says is free right now (it is released for the caller to bind). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** A free-looking loopback port in a range the machine's own services do not use. */
export function randomPort(): number {
  return 21000 + Math.floor(Math.random() * 9000);
}

/** Options of {@link OwnServer}. */
export interface OwnServerOptions {
  /**
   * The server's command-line arguments for `port` and its data folder, instead of the default
   * ones (e.g. a TLS port and a password for Redis, or `-c <file>` for NATS).
   */
  args?: (port: number, dir: string) => string[];
  /** The scheme of {@link OwnServer.url}: `rediss` or `tls` for a TLS server. */
  scheme?: string;
  /** nats-server configuration text (e.g. `max_payload: 16384`), given with `-c`; the port and store stay the defaults. */
  config?: string;
}

/**
 * A server process a test owns (so it can stop and restart it): redis-server with an
 * append-only file, or nats-server with JetStream, on a loopback port, data in `dir`.
 */
export class OwnServer {
  private child: ChildProcess | undefined;
  port = 0;
  private readonly kind: 'redis' | 'nats';
  /** The server's own folder (data, and any config file a test writes there). */
  readonly dir: string;
  private readonly options: OwnServerOptions;
  private readonly config: string | undefined;

  constructor(kind: 'redis' | 'nats', dir: string, options: OwnServerOptions = {}) {
    this.kind = kind;
    this.dir = join(dir, `${kind}-${Math.random().toString(36).slice(2, 8)}`);
    this.options = options;
    mkdirSync(this.dir, { recursive: true });
    if (options.config !== undefined) {
      this.config = join(this.dir, 'server.conf');
      writeFileSync(this.config, options.config);
    }
  }

  get url(): string {
    return `${this.options.scheme ?? this.kind}://127.0.0.1:${this.port}`;
  }

  /** Starts the server; the first start picks a free port, a restart keeps it. */
  async start(): Promise<this> {
    if (this.port === 0) this.port = await freePort();
    const args = this.options.args
      ? this.options.args(this.port, this.dir)
      : this.kind === 'redis'
        ? [
            '--port',
            String(this.port),
            '--bind',
            '127.0.0.1',
            '--dir',
            this.dir,
            '--appendonly',
            'yes',
            '--appendfsync',
            'always',
            '--save',
            '',
          ]
        : ['-a', '127.0.0.1', '-p', String(this.port), '-js', '-sd', this.dir, ...(this.config ? ['-c', this.config] : [])];
    this.child = reap(spawn(this.kind === 'redis' ? 'redis-server' : 'nats-server', args, { stdio: 'ignore' }));
    await waitUntil(() => answers(this.port), 10_000, `${this.kind}-server answers on ${this.port}`, 100);
    return this;
  }

  /** Stops the server (SIGTERM: Redis writes its AOF, NATS its store) and waits until the port is closed. */
  async stop(): Promise<void> {
    const c = this.child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill('SIGTERM');
    await exited;
    await waitUntil(async () => !(await answers(this.port)), 10_000, `${this.kind}-server has stopped answering on ${this.port}`, 100);
  }

  /** Sends `signal` to the server process (SIGSTOP freezes it without closing a connection; SIGCONT thaws it). */
  signal(signal: NodeJS.Signals): void {
    const c = this.child;
    if (c && c.exitCode === null && c.signalCode === null) c.kill(signal);
  }

  async restart(downMs = 0): Promise<void> {
    await this.stop();
    if (downMs > 0) await new Promise((r) => setTimeout(r, downMs));
    await this.start();
  }
}

function run(cmd: string, args: string[]): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const c = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    c.stdout?.on('data', (b: Buffer) => (out += b.toString()));
    c.stderr?.on('data', (b: Buffer) => (out += b.toString()));
    c.on('exit', (code) => resolve({ code, out }));
  });
}

/** Options of {@link RedisClusterServers}. */
export interface RedisClusterOptions {
  /** TLS only (no plain port), also on the cluster bus, with these PEM files. */
  tls?: { cert: string; key: string; ca: string };
  /** `requirepass` (and `masterauth`) of every node. */
  password?: string;
}

/** A 3-master Redis Cluster on loopback ports, started from redis-server by the test. */
export class RedisClusterServers {
  ports: number[] = [];
  private busPorts: number[] = [];
  private readonly children: ChildProcess[] = [];
  private readonly dir: string;
  private readonly options: RedisClusterOptions;

  constructor(dir: string, options: RedisClusterOptions = {}) {
    this.dir = join(dir, `redis-cluster-${Math.random().toString(36).slice(2, 8)}`);
    this.options = options;
    mkdirSync(this.dir, { recursive: true });
  }

  /** `REDIS_URL` listing every node (no credentials). */
  get url(): string {
    return this.ports.map((p) => `${this.options.tls ? 'rediss' : 'redis'}://127.0.0.1:${p}`).join(',');
  }

  async start(): Promise<this> {
    const { tls, password } = this.options;
    const serverTls = tls
      ? ['--tls-cluster', 'yes', '--tls-cert-file', tls.cert, '--tls-key-file', tls.key, '--tls-ca-cert-file', tls.ca]
      : [];
    const serverAuth = password ? ['--requirepass', password, '--masterauth', password] : [];
    const cli = [
      ...(tls ? ['--tls', '--cacert', tls.ca, '--cert', tls.cert, '--key', tls.key] : []),
      ...(password ? ['--no-auth-warning', '-a', password] : []),
    ];
    // Ports the OS reports free, for clients and for the cluster bus. Between the check and the
    // bind another process may take one (a busy machine opens many connections): a node that
    // exits saying so is started again, with all new ports.
    for (let attempt = 1; ; attempt++) {
      const failure = await this.startNodes(serverTls, serverAuth);
      if (failure === undefined) break;
      await this.stop();
      if (!failure.portTaken || attempt >= 3) throw new Error(failure.message);
    }
    const created = await run('redis-cli', [
      ...cli,
      '--cluster',
      'create',
      ...this.ports.map((p) => `127.0.0.1:${p}`),
      '--cluster-replicas',
      '0',
      '--cluster-yes',
    ]);
    if (created.code !== 0) throw new Error(`redis-cli --cluster create failed: ${created.out}`);
    await waitUntil(
      async () => (await run('redis-cli', [...cli, '-p', String(this.ports[0]), 'cluster', 'info'])).out.includes('cluster_state:ok'),
      20_000,
      'the Redis Cluster is at cluster_state:ok',
      100,
    );
    return this;
  }

  /** Starts the three nodes on new ports; undefined once each answers, else why one did not. */
  private async startNodes(serverTls: string[], serverAuth: string[]): Promise<{ message: string; portTaken: boolean } | undefined> {
    const { tls } = this.options;
    this.ports = [];
    this.busPorts = [];
    this.children.length = 0;
    for (let i = 0; i < 6; i++) (i < 3 ? this.ports : this.busPorts).push(await freePort());
    const logOf = (port: number) => join(this.dir, `redis-${port}.log`);
    for (const [i, port] of this.ports.entries()) {
      const listen = tls ? ['--port', '0', '--tls-port', String(port)] : ['--port', String(port)];
      this.children.push(
        reap(
          spawn(
            'redis-server',
            [
              ...listen,
              '--cluster-port',
              String(this.busPorts[i]),
              '--bind',
              '127.0.0.1',
              '--cluster-enabled',
              'yes',
              '--cluster-config-file',
              `nodes-${port}.conf`,
              '--dir',
              this.dir,
              '--logfile',
              logOf(port),
              '--save',
              '',
              '--appendonly',
              'no',
              ...serverTls,
              ...serverAuth,
            ],
            { stdio: 'ignore' },
          ),
        ),
      );
    }
    for (const [i, port] of this.ports.entries()) {
      const child = this.children[i]!;
      const exited = () => child.exitCode !== null || child.signalCode !== null;
      await waitUntil(async () => exited() || (await answers(port)), 10_000, `redis-server (cluster) answers on ${port}`, 100);
      if (!exited()) continue;
      const log = existsSync(logOf(port)) ? readFileSync(logOf(port), 'utf8').trim().split('\n').slice(-5).join('\n') : '(no log)';
      return {
        message: `redis-server (cluster) on ${port} (bus ${this.busPorts[i]}) exited with ${child.exitCode ?? child.signalCode}: ${log}`,
        portTaken: /address already in use/i.test(log),
      };
    }
    return undefined;
  }

  async stop(): Promise<void> {
    await Promise.all(
      this.children.map(
        (c) =>
          new Promise<void>((r) => {
            if (c.exitCode !== null || c.signalCode !== null) return r();
            c.once('exit', () => r());
            c.kill('SIGTERM');
          }),
      ),
    );
  }
}

/** A 3-node NATS cluster with JetStream on loopback ports, started from nats-server by the test. */
export class NatsClusterServers {
  clientPorts: number[] = [];
  routePorts: number[] = [];
  readonly children: (ChildProcess | undefined)[] = [];
  private readonly dir: string;

  constructor(dir: string) {
    this.dir = join(dir, `nats-cluster-${Math.random().toString(36).slice(2, 8)}`);
  }

  /** `NATS_URL` listing every node. */
  get url(): string {
    return this.clientPorts.map((p) => `nats://127.0.0.1:${p}`).join(',');
  }

  startNode(i: number): void {
    const store = join(this.dir, `n${i}`);
    mkdirSync(store, { recursive: true });
    const routes = this.routePorts.map((p) => `nats://127.0.0.1:${p}`).join(',');
    this.children[i] = reap(
      spawn(
        'nats-server',
        [
          '-a',
          '127.0.0.1',
          '-p',
          String(this.clientPorts[i]),
          '-n',
          `n${i}`,
          '-js',
          '-sd',
          store,
          '--cluster_name',
          'bosun-test',
          '--cluster',
          `nats://127.0.0.1:${this.routePorts[i]}`,
          '--routes',
          routes,
        ],
        { stdio: 'ignore' },
      ),
    );
  }

  async start(): Promise<this> {
    for (let i = 0; i < 6; i++) (i < 3 ? this.clientPorts : this.routePorts).push(await freePort());
    for (let i = 0; i < 3; i++) this.startNode(i);
    for (const port of this.clientPorts) await waitUntil(() => answers(port), 10_000, `nats-server (cluster) answers on ${port}`, 100);
    return this;
  }

  /** SIGKILLs node `i`. */
  async kill(i: number): Promise<void> {
    const c = this.children[i];
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill('SIGKILL');
    await exited;
  }

  /** Stops every node (SIGKILL: the test's data is thrown away, and a clustered shutdown is slow). */
  async stop(): Promise<void> {
    for (let i = 0; i < 3; i++) await this.kill(i);
  }
}
