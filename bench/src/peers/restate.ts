/**
 * The standard incident on Restate: the Restate server (`@restatedev/restate-server`'s binary,
 * from its platform package) and a service `incident` of `@restatedev/restate-sdk` whose handler
 * runs the agent loop with every model turn and every tool call in `ctx.run`, so that each result
 * is journaled by the server before the next step; the demo MCP server over one stdio session of
 * the endpoint process (worker.ts).
 *
 * The server looks up its latest release on GitHub when it starts (`check_if_latest_version` in
 * its main.rs, unconditional in 1.7.12: neither `disable-telemetry` nor a proxy variable turns it
 * off). The bench starts it in a mount namespace of its own (`unshare --mount`) where
 * /etc/resolv.conf names 127.0.0.1 as the only name server and /etc/hosts maps api.github.com to
 * 127.0.0.1: the lookup resolves the host to 127.0.0.1 and its connection to port 443 is refused
 * (nothing listens there), and no packet leaves the machine. `disable-telemetry = true` and `DO_NOT_TRACK=1` turn its telemetry off.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { arch, platform } from 'node:os';
import { join } from 'node:path';
import { trackChild, stopChild } from '../cluster.js';
import { sleep } from '../util.js';
import { peerResolve } from './load.js';
import { fakeDecision, parseIncidentText, type PeerIncident, type PeerOutcome, type PlannedCall } from './plan.js';

/** The Restate service and handler of the standard incident. */
export const RESTATE_SERVICE = 'incident';
export const RESTATE_HANDLER = 'run';

/** A free TCP port on 127.0.0.1 (bound once and released: a race with other programs is possible but rare). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const address = s.address();
      s.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/** /etc/resolv.conf inside the namespace: only the loopback answers names (nothing listens there). */
export const OFFLINE_RESOLV_CONF = 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n';
/** /etc/hosts inside the namespace: the release lookup's host on the loopback. */
export const OFFLINE_HOSTS = '127.0.0.1 localhost\n::1 localhost\n127.0.0.1 api.github.com\n';

/**
 * The command line that runs `argv` in a mount namespace of its own whose /etc/resolv.conf and
 * /etc/hosts are {@link OFFLINE_RESOLV_CONF} and {@link OFFLINE_HOSTS} (written into `dir`),
 * so that a name it looks up never reaches a name server off the machine. `unshare` makes the
 * mounts private to the namespace: the machine's own files are untouched. Needs root (CI and
 * this machine run as root) or unprivileged user namespaces. The program is `exec`ed: its pid is
 * the child's.
 */
export function offlineCommand(dir: string, argv: readonly string[]): { command: string; args: string[] } {
  writeFileSync(join(dir, 'resolv.conf'), OFFLINE_RESOLV_CONF);
  writeFileSync(join(dir, 'hosts'), OFFLINE_HOSTS);
  const script = 'mount --bind "$0/resolv.conf" /etc/resolv.conf && mount --bind "$0/hosts" /etc/hosts && exec "$@"';
  return { command: 'unshare', args: ['--mount', '--', 'sh', '-c', script, dir, ...argv] };
}

/** The server's configuration file (TOML): loopback ports, its data under `dir`, telemetry off. */
export function restateConfig(o: { dir: string; ingressPort: number; adminPort: number; fsync: boolean }): string {
  const lines = [
    `base-dir = "${join(o.dir, 'data')}"`,
    'node-name = "bench"',
    'disable-telemetry = true',
    'log-filter = "warn"',
    'log-format = "compact"',
    'log-disable-ansi-codes = true',
    '[admin]',
    `bind-address = "127.0.0.1:${o.adminPort}"`,
    '[ingress]',
    `bind-address = "127.0.0.1:${o.ingressPort}"`,
  ];
  // The defaults sync the write-ahead logs of the log server and the local loglet at each commit;
  // `fsync: false` is the bench's "commits do not wait for the disk" measurement only.
  if (!o.fsync) lines.push('[log-server]', 'rocksdb-disable-wal-fsync = true', '[bifrost.local]', 'rocksdb-disable-wal-fsync = true');
  return `${lines.join('\n')}\n`;
}

/** One Restate server process, with its data in a temp folder. */
export class RestateServer {
  private constructor(
    readonly child: ChildProcess,
    readonly ingressUrl: string,
    readonly adminUrl: string,
    private readonly output: string[],
  ) {}

  get pid(): number {
    return this.child.pid ?? -1;
  }

  /** Starts the server (see the module's note on the release lookup) and waits for its admin API, 60 s at most. */
  static async start(o: { root: string; dir: string; fsync: boolean }): Promise<RestateServer> {
    const binary = peerResolve(o.root, `@restatedev/restate-server-${platform()}-${arch()}/bin/restate-server`);
    const [ingressPort, adminPort, fabricPort] = [await freePort(), await freePort(), await freePort()];
    const configPath = join(o.dir, 'restate.toml');
    writeFileSync(configPath, restateConfig({ dir: o.dir, ingressPort, adminPort, fsync: o.fsync }));
    const argv = [binary, '--config-file', configPath, '--bind-ip', '127.0.0.1', '--bind-port', String(fabricPort)];
    const { command, args } = offlineCommand(o.dir, [...argv, '--listen-mode', 'tcp', '--no-logo']);
    const child = spawn(command, args, {
      cwd: o.dir,
      env: { PATH: process.env.PATH ?? '', HOME: o.dir, DO_NOT_TRACK: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    trackChild(child);
    const output: string[] = [];
    for (const stream of [child.stdout, child.stderr]) {
      stream?.setEncoding('utf8');
      stream?.on('data', (chunk: string) => {
        output.push(...chunk.split('\n').filter(Boolean));
        output.splice(0, Math.max(0, output.length - 40));
      });
    }
    const server = new RestateServer(child, `http://127.0.0.1:${ingressPort}`, `http://127.0.0.1:${adminPort}`, output);
    await server.waitHealthy(60_000);
    return server;
  }

  private async waitHealthy(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (this.child.exitCode !== null || this.child.signalCode !== null)
        throw new Error(`the Restate server exited (${this.child.exitCode ?? this.child.signalCode}) before it answered. ${this.tail()}`);
      try {
        const r = await fetch(`${this.adminUrl}/health`, { signal: AbortSignal.timeout(2_000) });
        if (r.ok) return;
      } catch {
        // Not listening yet: try again until the deadline.
      }
      await sleep(100);
    }
    throw new Error(`the Restate server did not answer on ${this.adminUrl}/health within ${timeoutMs} ms. ${this.tail()}`);
  }

  /** Registers (or re-registers) the endpoint at `uri` and waits until the ingress knows the service. */
  async register(uri: string, timeoutMs = 30_000): Promise<void> {
    const r = await fetch(`${this.adminUrl}/deployments`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ uri, force: true }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (!r.ok) throw new Error(`registering ${uri} with the Restate server: HTTP ${r.status} ${(await r.text()).slice(0, 300)}`);
  }

  /** The last lines the server printed, for error messages. */
  tail(): string {
    return this.output.length ? `Last lines:\n  ${this.output.slice(-10).join('\n  ')}` : 'It printed nothing.';
  }

  /** SIGTERM, then SIGKILL after 20 s. */
  stop(): Promise<void> {
    return stopChild(this.child, 20_000);
  }
}

async function ingressJson<T>(url: string, init: RequestInit, what: string): Promise<T> {
  const r = await fetch(url, init);
  const text = await r.text();
  if (!r.ok) throw new RestateIngressError(r.status, `${what}: HTTP ${r.status} ${text.slice(0, 300)}`);
  return JSON.parse(text) as T;
}

/** An answer of the Restate ingress other than 2xx; `status` 404 while a new deployment is not yet known. */
export class RestateIngressError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'RestateIngressError';
  }
}

/** Runs one incident through the ingress and waits for its result (request/response). */
export function invokeIncident(ingressUrl: string, incident: PeerIncident, timeoutMs = 60_000): Promise<PeerOutcome> {
  return ingressJson<PeerOutcome>(
    `${ingressUrl}/${RESTATE_SERVICE}/${RESTATE_HANDLER}`,
    {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(incident),
      signal: AbortSignal.timeout(timeoutMs),
    },
    `incident ${incident.id}`,
  );
}

/** Starts one incident without waiting (`/send`) under an idempotency key; resolves with its invocation id. */
export async function sendIncident(ingressUrl: string, incident: PeerIncident, idempotencyKey: string): Promise<string> {
  const r = await ingressJson<{ invocationId?: string }>(
    `${ingressUrl}/${RESTATE_SERVICE}/${RESTATE_HANDLER}/send`,
    {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
      body: JSON.stringify(incident),
      signal: AbortSignal.timeout(30_000),
    },
    `sending incident ${incident.id}`,
  );
  if (!r.invocationId) throw new Error(`sending incident ${incident.id}: the ingress answered without an invocationId`);
  return r.invocationId;
}

/** Waits for an invocation's output (`/restate/invocation/<id>/attach`). */
export function attachInvocation(ingressUrl: string, invocationId: string, timeoutMs: number): Promise<PeerOutcome> {
  return ingressJson<PeerOutcome>(
    `${ingressUrl}/restate/invocation/${invocationId}/attach`,
    { signal: AbortSignal.timeout(timeoutMs) },
    `attaching to ${invocationId}`,
  );
}

// ---------------------------------------------------------------------------------------------
// The service (run by the endpoint process, worker.ts)

/** The part of Restate's handler context the incident uses. */
interface RestateContext {
  run<T>(name: string, action: () => Promise<T> | T): PromiseLike<T>;
}

/** The parts of `@restatedev/restate-sdk` the endpoint uses. */
export interface RestateSdk {
  service(definition: {
    name: string;
    handlers: Record<string, (ctx: RestateContext, input: PeerIncident) => Promise<PeerOutcome>>;
  }): unknown;
  createEndpointHandler(options: { services: unknown[] }): (request: unknown, response: unknown) => void;
}

/** One message of the agent's conversation, as the handler keeps it. */
type Message =
  | { role: 'user'; content: string }
  | { role: 'assistant'; content: string; toolCall?: PlannedCall }
  | { role: 'tool'; name: string; content: unknown };

/** The fake model: decides from the conversation alone (the incident in the first message, the tool results after it). */
export function fakeRestateModel(messages: readonly Message[]): { call: PlannedCall } | { answer: string } {
  const first = messages[0];
  const incident = parseIncidentText(first?.role === 'user' ? first.content : '');
  return fakeDecision(incident, messages.filter((m) => m.role === 'tool').length);
}

/** Calls one MCP tool; the result is journaled as it is (JSON). */
export type McpCall = (name: string, args: Record<string, unknown>) => Promise<unknown>;

/** The agent loop as a Restate service: each model turn and each tool call is one `ctx.run` step. */
export function incidentService(sdk: RestateSdk, callTool: McpCall, maxTurns = 10): unknown {
  return sdk.service({
    name: RESTATE_SERVICE,
    handlers: {
      [RESTATE_HANDLER]: async (ctx, incident) => {
        const messages: Message[] = [{ role: 'user', content: JSON.stringify(incident) }];
        const toolCalls: string[] = [];
        for (let turn = 0; turn < maxTurns; turn++) {
          const decision = await ctx.run('model', () => fakeRestateModel(messages));
          if ('answer' in decision) return { answer: decision.answer, toolCalls };
          messages.push({ role: 'assistant', content: '', toolCall: decision.call });
          const result = await ctx.run(`tool ${decision.call.tool}`, () => callTool(decision.call.tool, decision.call.args));
          messages.push({ role: 'tool', name: decision.call.tool, content: result });
          toolCalls.push(decision.call.tool);
        }
        // An honest end rather than a loop: the run answers that it gave up.
        return { answer: `INCOMPLETE: no answer after ${maxTurns} model turns`, toolCalls };
      },
    },
  });
}
