/**
 * A local stand-in for the Slack Web API (`POST /api/<method>`), answering as Slack does: HTTP
 * 200 with `{ ok: true, … }` or `{ ok: false, error }` (the bodies of `test/fixtures/slack/`),
 * `invalid_auth` for a wrong bearer token, and whatever `answer` says for a method. Records
 * every call (method, arguments — form fields, JSON ones parsed — and token) in order.
 */
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ROOT } from './paths.js';

/** One call the server received. */
export interface SlackCall {
  method: string;
  args: Record<string, unknown>;
  token: string | undefined;
}

/** An answer: a fixture's name (`chat-postMessage-ok`), or a status and body of its own. */
export type SlackAnswer = string | { status: number; body: unknown; headers?: Record<string, string> };

/** The running server. */
export interface SlackServer {
  /** The Web API base, for `slackApiUrl` (`http://127.0.0.1:<port>/api/`). */
  apiUrl: string;
  calls: SlackCall[];
  /** The calls of one method. */
  of(method: string): SlackCall[];
  close(): Promise<void>;
}

/** A Slack fixture's body. */
export function slackFixture(name: string): unknown {
  return JSON.parse(readFileSync(`${ROOT}/test/fixtures/slack/${name}.json`, 'utf8'));
}

const DEFAULT_ANSWERS: Record<string, string> = {
  'chat.postMessage': 'chat-postMessage-ok',
  'chat.update': 'chat-update-ok',
  'chat.postEphemeral': 'chat-postEphemeral-ok',
  'users.info': 'users-info-ok',
};

/** A method's answer as Slack gives it: `users.info` knows only the fixture's user. */
function defaultAnswer(call: SlackCall): string | undefined {
  if (call.method !== 'users.info') return DEFAULT_ANSWERS[call.method];
  const known = (slackFixture('users-info-ok') as { user: { id: string } }).user.id;
  return call.args.user === known ? 'users-info-ok' : 'error-user-not-found';
}

/** The call's arguments: a form's fields (a field holding JSON — blocks — parsed), or a JSON body's. */
function argsOf(contentType: string | undefined, body: string): Record<string, unknown> {
  if ((contentType ?? '').startsWith('application/json')) return JSON.parse(body) as Record<string, unknown>;
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
 * Starts the server. `token` is the bot token it accepts; `answer(call, index)` may choose the
 * answer of a call (its index among the calls of its method), else the method's default fixture.
 * A promise holds the answer until it settles (a chaos test kills the caller meanwhile); the
 * call is recorded when it arrives, before its answer.
 */
export async function startSlackServer(
  token: string,
  answer: (call: SlackCall, index: number) => SlackAnswer | undefined | Promise<SlackAnswer | undefined> = () => undefined,
): Promise<SlackServer> {
  const calls: SlackCall[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const method = (req.url ?? '').replace(/^\/api\//, '').split('?')[0]!;
      const auth = req.headers.authorization;
      const call: SlackCall = {
        method,
        args: argsOf(req.headers['content-type'], Buffer.concat(chunks).toString('utf8')),
        token: auth?.startsWith('Bearer ') ? auth.slice(7) : undefined,
      };
      const index = calls.filter((c) => c.method === method).length;
      calls.push(call);
      const send = (chosen: SlackAnswer) => {
        const reply =
          typeof chosen === 'string'
            ? { status: 200, body: chosen === 'error-unknown-method' ? { ok: false, error: 'unknown_method' } : slackFixture(chosen) }
            : chosen;
        // The caller may be gone (killed while the answer was held).
        if (res.destroyed) return;
        res.writeHead(reply.status, { 'content-type': 'application/json; charset=utf-8', ...reply.headers });
        res.end(JSON.stringify(reply.body));
      };
      if (call.token !== token) return send('error-invalid-auth');
      const chosen = answer(call, index);
      if (!(chosen instanceof Promise)) return send(chosen ?? defaultAnswer(call) ?? 'error-unknown-method');
      void chosen.then(
        (held) => send(held ?? defaultAnswer(call) ?? 'error-unknown-method'),
        () => send({ status: 500, body: { ok: false, error: 'internal_error' } }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    apiUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/`,
    calls,
    of: (method) => calls.filter((c) => c.method === method),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A block_actions payload of the fixture: `user` clicked `action` on the message of approval `id`, showing `blocks`. */
export function blockActionsPayload(id: string, user: string, action = 'bosun.approve', blocks: unknown = []): Record<string, unknown> {
  const p = slackFixture('block-actions') as Record<string, any>;
  p.user.id = user;
  p.actions[0].action_id = action;
  p.actions[0].value = id;
  p.message.blocks = blocks;
  return p;
}

/** Posts an interaction to `${base}/slack/interactions` as Slack does: a form with `payload`, signed with `secret` now. */
export function postInteraction(base: string, payload: unknown, secret: string): Promise<Response> {
  const body = `payload=${encodeURIComponent(JSON.stringify(payload))}`;
  const ts = Math.floor(Date.now() / 1000);
  const signature = `v0=${createHmac('sha256', secret).update(`v0:${ts}:${body}`).digest('hex')}`;
  return fetch(`${base}/slack/interactions`, {
    method: 'POST',
    body,
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      'x-slack-request-timestamp': String(ts),
      'x-slack-signature': signature,
    },
  });
}
