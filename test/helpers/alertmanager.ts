import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { reap } from './reaper.js';
import { freePort } from './servers.js';
import { waitUntil } from './wait.js';

/** Debian's Alertmanager (`apt-get install prometheus-alertmanager`; `.ci/run` installs it). */
export const ALERTMANAGER_BIN = process.env.BOSUN_TEST_ALERTMANAGER ?? '/usr/bin/prometheus-alertmanager';

/** The version line of {@link ALERTMANAGER_BIN} (`alertmanager, version 0.25.0 …`). */
export function alertmanagerVersion(): string {
  if (!existsSync(ALERTMANAGER_BIN))
    throw new Error(`${ALERTMANAGER_BIN} is not installed: apt-get install prometheus-alertmanager (or set BOSUN_TEST_ALERTMANAGER)`);
  const r = spawnSync(ALERTMANAGER_BIN, ['--version'], { encoding: 'utf8' });
  return `${r.stdout}${r.stderr}`.split('\n')[0]!.trim();
}

/** An alert as Alertmanager's API v2 takes it (`POST /api/v2/alerts`). */
export interface PostableAlert {
  labels: Record<string, string>;
  annotations?: Record<string, string>;
  startsAt?: string;
  endsAt?: string;
}

/** An alert as Alertmanager reports it (`GET /api/v2/alerts`). */
export interface GettableAlert extends PostableAlert {
  fingerprint: string;
  startsAt: string;
  endsAt: string;
  status: { state: string };
}

/**
 * A real Alertmanager process on loopback ports of its own, clustering off, its data in `dir`,
 * with the given configuration (YAML; JSON is YAML). Its output is kept for failure messages.
 */
export class AlertmanagerProcess {
  private child: ChildProcess | undefined;
  private output = '';
  port = 0;

  constructor(
    private readonly dir: string,
    private readonly config: unknown,
  ) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async start(): Promise<this> {
    alertmanagerVersion();
    this.port = await freePort();
    const home = join(this.dir, `alertmanager-${this.port}`);
    mkdirSync(home, { recursive: true });
    const file = join(home, 'alertmanager.yml');
    writeFileSync(file, JSON.stringify(this.config, null, 2));
    const args = [
      `--config.file=${file}`,
      `--storage.path=${home}`,
      `--web.listen-address=127.0.0.1:${this.port}`,
      // Clustering off: no gossip port, and a notification is sent at once (no peer wait).
      '--cluster.listen-address=',
      '--log.level=info',
    ];
    const child = reap(spawn(ALERTMANAGER_BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] }));
    this.child = child;
    const keep = (b: Buffer) => (this.output = `${this.output}${b.toString()}`.slice(-20_000));
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    await waitUntil(
      async () => {
        if (child.exitCode !== null) throw new Error(`alertmanager exited (${child.exitCode}): ${this.output}`);
        return fetch(`${this.url}/-/ready`).then(
          (r) => r.ok,
          () => false,
        );
      },
      15_000,
      () => `alertmanager ready on ${this.port}; its output: ${this.output}`,
      100,
    );
    return this;
  }

  /** Posts alerts to its API v2. */
  async post(alerts: PostableAlert[]): Promise<void> {
    const res = await fetch(`${this.url}/api/v2/alerts`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(alerts),
    });
    if (!res.ok) throw new Error(`alertmanager refused the alerts: HTTP ${res.status} ${await res.text()}`);
  }

  /** The alerts it holds, with the fingerprints it gave them. */
  async alerts(): Promise<GettableAlert[]> {
    return (await (await fetch(`${this.url}/api/v2/alerts`)).json()) as GettableAlert[];
  }

  /** Its last output, for failure messages. */
  get log(): string {
    return this.output;
  }

  async stop(): Promise<void> {
    const c = this.child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill('SIGTERM');
    await exited;
  }
}
