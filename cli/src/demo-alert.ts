/**
 * The demo's alert hop: a sample Prometheus Alertmanager notification posted to the intake, and
 * the Slack-style message its run's answer becomes, caught by a local receiver standing in for
 * Slack (docs/intake-and-delivery.md).
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { errorMessage } from '@bosun/contract';
import { CliError } from './errors.js';

/** The sink the demo adds to its config: every run's answer goes to the local receiver. */
export const DEMO_SINK = 'demo-slack';

/** A sample Alertmanager (webhook version 4) notification: one firing alert, new for each demo (`stamp`). */
export function sampleAlert(stamp: string): Record<string, unknown> {
  const labels = { alertname: 'PodCrashLooping', namespace: 'shop', service: 'checkout', severity: 'critical' };
  return {
    version: '4',
    groupKey: '{}:{alertname="PodCrashLooping"}',
    truncatedAlerts: 0,
    status: 'firing',
    receiver: 'bosun',
    groupLabels: { alertname: 'PodCrashLooping' },
    commonLabels: labels,
    commonAnnotations: {},
    externalURL: 'http://alertmanager.demo:9093',
    alerts: [
      {
        status: 'firing',
        labels,
        annotations: {
          summary: 'checkout pods are crash looping',
          description: 'checkout restarted 7 times in 10 minutes after the last deploy.',
          runbook_url: 'https://runbooks.example/pod-crashlooping',
        },
        startsAt: new Date().toISOString(),
        endsAt: '0001-01-01T00:00:00Z',
        generatorURL: 'http://prometheus.demo:9090/graph',
        fingerprint: createHash('sha256').update(stamp).digest('hex').slice(0, 16),
      },
    ],
  };
}

/** The `text` of a Slack webhook body, or undefined when it is not one. */
function slackTextOf(body: string): string | undefined {
  try {
    const parsed = JSON.parse(body) as { text?: unknown };
    return typeof parsed.text === 'string' ? parsed.text : undefined;
  } catch {
    return undefined;
  }
}

/** The sink of the demo's Slack app stand-in: pending approvals are announced to it as Block Kit messages. */
export const DEMO_APP_SINK = 'demo-slack-app';
/** The demo's Slack app: its channel, and a bot token and signing secret that only the local stand-in knows. */
const DEMO_APP = { channel: 'C0DEMO0001', botToken: 'xoxb-demo-bot-token', signingSecret: 'demo-slack-signing-secret' };

/** A Block Kit block, as far as the demo prints it. */
interface ShownBlock {
  type?: unknown;
  text?: unknown;
  fields?: unknown[];
  elements?: { type?: unknown; text?: unknown; action_id?: unknown; value?: unknown }[];
}

/** The `text` of a text object (`{type, text}`), or "". */
function textOf(t: unknown): string {
  const inner = typeof t === 'object' && t !== null ? (t as { text?: unknown }).text : undefined;
  return typeof inner === 'string' ? inner : '';
}

/** A Block Kit block as the demo prints it: its type, then its text, fields or buttons, one line each. */
export function blockLines(block: ShownBlock): string[] {
  const indent = (s: string) => s.split('\n').map((l) => `      ${l}`);
  const lines = [`    [${String(block.type)}]`];
  if (block.text) lines.push(...indent(textOf(block.text)));
  for (const f of block.fields ?? []) lines.push(...indent(textOf(f)));
  for (const e of block.elements ?? [])
    lines.push(
      ...(e.type === 'button'
        ? [`      (button "${textOf(e.text)}": action_id ${String(e.action_id)}, value ${String(e.value)})`]
        : indent(textOf(e))),
    );
  return lines;
}

/** The arguments of a Web API call: the form's fields, a JSON field (blocks) parsed. */
function apiArgs(body: string): Record<string, unknown> {
  const args: Record<string, unknown> = {};
  for (const [k, v] of new URLSearchParams(body)) {
    try {
      args[k] = /^[[{]/.test(v) ? (JSON.parse(v) as unknown) : v;
    } catch {
      args[k] = v;
    }
  }
  return args;
}

/**
 * A local stand-in for Slack: an incoming webhook (`POST /slack`, each message kept by its
 * `Idempotency-Key`) and the Web API of the demo's Slack app (`POST /api/<method>`, answered as
 * Slack does), which prints the blocks of every message it is sent.
 */
export class DemoReceiver {
  private readonly messages = new Map<string, string>();
  private readonly waiters = new Map<string, (text: string) => void>();
  private server: Server | undefined;
  private posted = 0;

  constructor(private readonly say: (line: string) => void = () => undefined) {}

  /** A Web API call of the demo's Slack app, answered as Slack would. */
  private api(method: string, auth: string | undefined, body: string): Record<string, unknown> {
    if (auth !== `Bearer ${DEMO_APP.botToken}`) return { ok: false, error: 'invalid_auth' };
    const args = apiArgs(body);
    if (method !== 'chat.postMessage' && method !== 'chat.update') return { ok: true };
    if (args.channel !== DEMO_APP.channel) return { ok: false, error: 'channel_not_found' };
    const ts = method === 'chat.update' ? String(args.ts) : `${Math.floor(Date.now() / 1000)}.${String(++this.posted).padStart(6, '0')}`;
    this.say('');
    this.say(`=== the Slack stand-in received ${method} to ${String(args.channel)}: ${typeof args.text === 'string' ? args.text : ''}`);
    for (const block of Array.isArray(args.blocks) ? (args.blocks as ShownBlock[]) : []) for (const l of blockLines(block)) this.say(l);
    this.say('===');
    return { ok: true, channel: args.channel, ts, message: { text: args.text, type: 'message', subtype: 'bot_message', ts } };
  }

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const path = (req.url ?? '').split('?')[0] ?? '';
        if (path.startsWith('/api/')) {
          const answer = this.api(path.slice('/api/'.length), req.headers.authorization, Buffer.concat(chunks).toString('utf8'));
          res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(answer));
          return;
        }
        const key = String(req.headers['idempotency-key'] ?? '');
        const text = slackTextOf(Buffer.concat(chunks).toString('utf8'));
        if (text === undefined) {
          res.writeHead(400).end();
          return;
        }
        // A repeat of a key (a delivery sent again after a crash) is acknowledged, not shown twice.
        if (!this.messages.has(key)) {
          this.messages.set(key, text);
          this.waiters.get(key)?.(text);
        }
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/slack`;
  }

  /** The message delivered under `key`, once it arrives (rejects after `timeoutMs`). */
  waitFor(key: string, timeoutMs: number): Promise<string> {
    const have = this.messages.get(key);
    if (have !== undefined) return Promise.resolve(have);
    return new Promise((resolveP, reject) => {
      const timer = setTimeout(
        () => reject(new CliError('demo_server', `no message delivered for ${key} within ${timeoutMs} ms`)),
        timeoutMs,
      );
      this.waiters.set(key, (text) => {
        clearTimeout(timer);
        resolveP(text);
      });
    });
  }

  async close(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((r) => this.server?.close(r));
  }
}

/**
 * The demo's config: the given one plus a `delivery` section sending every answer to the local
 * receiver, written to `<root>/.bosun/demo/bosun.yaml` (two folders below the root, like
 * infra/demo/bosun.yaml, so its relative MCP server paths still resolve). A config that has a
 * `delivery` section of its own is used as it is (undefined).
 */
export function demoConfigWithDelivery(root: string, configFile: string, receiverUrl: string): string | undefined {
  const text = readFileSync(configFile, 'utf8');
  if (/^delivery:/m.test(text)) return undefined;
  const out = join(root, '.bosun', 'demo', 'bosun.yaml');
  // Its relative paths are written for a file two folders below the root, as `out` is.
  if (resolve(configFile, '../../..') !== resolve(root)) return undefined;
  mkdirSync(dirname(out), { recursive: true });
  const delivery = [
    '',
    '# Added by the demo: every answer goes to a local stand-in for Slack.',
    'delivery:',
    '  attempts: 3',
    '  backoffMs: 500',
    '  sinks:',
    `    ${DEMO_SINK}: { type: slack, url: "${receiverUrl}", answerLines: 6 }`,
    '    # The Slack app mode: approvals as messages with Approve / Deny buttons (docs/approvals.md#slack).',
    `    ${DEMO_APP_SINK}:`,
    '      type: slack',
    `      botToken: ${DEMO_APP.botToken}`,
    `      channel: ${DEMO_APP.channel}`,
    `      signingSecret: ${DEMO_APP.signingSecret}`,
    `      slackApiUrl: "${new URL('/api/', receiverUrl).href}"`,
    '      users: { U0DEMO0001: demo }',
    `  defaultSinks: [${DEMO_SINK}]`,
    `  announceApprovals: [${DEMO_APP_SINK}]`,
    '  approvalScanMs: 500',
    '',
  ].join('\n');
  writeFileSync(out, `${text.trimEnd()}\n${delivery}`);
  return out;
}

/** Posts the sample alert to the intake; returns the incident and run it became. */
export async function postSampleAlert(port: number, token: string, stamp: string): Promise<{ incidentId: string; runId: string }> {
  const res = await fetch(`http://127.0.0.1:${port}/alerts/alertmanager`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(sampleAlert(stamp)),
  });
  const body = (await res.json()) as { accepted?: { incidentId: string; runId: string }[]; error?: string };
  const first = body.accepted?.[0];
  if (res.status !== 202 || !first)
    throw new CliError('demo_server', `the intake answered ${res.status}: ${body.error ?? JSON.stringify(body)}`);
  return first;
}

/** Where the intake listens in the demo: a port free right now. */
export function freePort(): Promise<number> {
  return new Promise((resolveP, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as AddressInfo).port;
      srv.close(() => resolveP(port));
    });
  });
}

/** The alert hop of a demo, ready before the cluster starts. */
export interface DemoAlertHop {
  /** Posts the sample alert, waits for its Slack-style message and prints it; returns 1 when it did not arrive. */
  run(stamp: string, say: (line: string) => void): Promise<number>;
  close(): Promise<void>;
}

/**
 * Prepares the alert hop: starts the local receiver (which prints, with `say`, the blocks of the
 * Slack app's messages), writes the demo's config with a `delivery` section, and points the services at it (`BOSUN_CONFIG`) and the intake at a free port
 * (`BOSUN_INTAKE_PORT`). Undefined when the config is not the demo's (it is then used as is,
 * and the demo starts no intake).
 */
export async function prepareDemoAlert(
  root: string,
  configFile: string,
  say: (line: string) => void = () => undefined,
): Promise<DemoAlertHop | undefined> {
  if (!/^intake:/m.test(readFileSync(configFile, 'utf8'))) return undefined;
  const receiver = new DemoReceiver(say);
  const url = await receiver.start();
  const config = demoConfigWithDelivery(root, configFile, url);
  if (!config) {
    await receiver.close();
    return undefined;
  }
  const port = await freePort();
  process.env.BOSUN_CONFIG = config;
  process.env.BOSUN_INTAKE_PORT = String(port);
  const token = process.env.BOSUN_INTAKE_TOKEN ?? 'demo-intake-token';
  return {
    async run(stamp, say) {
      try {
        const { incidentId, runId } = await postSampleAlert(port, token, stamp);
        say(`posted a sample Alertmanager alert to the intake (POST /alerts/alertmanager) → incident ${incidentId}, run ${runId}`);
        const text = await receiver.waitFor(`${runId}.${DEMO_SINK}`, 180_000);
        say('');
        say(`=== Slack message delivered for ${incidentId} (run ${runId}):`);
        say(text);
        say('===');
        return 0;
      } catch (err) {
        say(`!! the alert hop: ${errorMessage(err)}`);
        return 1;
      }
    },
    close: () => receiver.close(),
  };
}
