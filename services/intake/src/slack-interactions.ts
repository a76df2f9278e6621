/**
 * `POST /slack/interactions`: the Approve / Deny buttons of the Slack app sinks' approval
 * messages. Slack posts `application/x-www-form-urlencoded` with one field, `payload`, a JSON
 * `block_actions` payload, signed with the app's signing secret.
 *
 *   200 ""                 taken: decided (the message updated once to say who, where, when), or
 *                          refused with an ephemeral message to the clicker (unmapped user,
 *                          already decided, no such approval), or not a button of ours
 *   400 {"error": reason}  signed, but not a form with a JSON `payload` of Slack's shape
 *   401 {"error": reason}  no valid signature, or a timestamp more than 5 minutes from now
 *   413 {"error": reason}  a body past 1 MiB
 *
 * Every decision goes through `ApprovalStore.decide`, the same as the CLI's, the HTTP API's and
 * the console's: written once, the first decision wins, and the loser is told who won. The
 * message is updated once per approval, by whoever first claims it ({@link SlackMessageUpdates}):
 * the winner, or — when the winner's process died between the decision and the update, or the
 * decision came from another path — the next click, which finds the approval decided.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import type { Logger, OperatorEntry, SlackAppSink } from '@bosun/config';
import type { Actor, Approval, Decision } from '@bosun/contract';
import { sendJson } from '@bosun/transport';
import {
  ApprovalError,
  OperatorDirectory,
  approvalResolvedEvent,
  keys,
  type ApprovalStore,
  type EventSink,
  type RedisClient,
} from '@bosun/transport';
import { readBounded } from './body.js';
import { SlackApiError, slackApiFor, type SlackApi, type SlackBlock } from './slack-api.js';
import { ACTIONS_BLOCK, APPROVE_ACTION, DENY_ACTION, decidedBlocks, decidedText, type DecidedBy } from './slack-blocks.js';
import { verifySlackRequest } from './slack-signature.js';

/** The path Slack's Interactivity Request URL points at. */
export const SLACK_INTERACTIONS_PATH = '/slack/interactions';
const MAX_BODY_BYTES = 1024 * 1024;

/** The parts of a `block_actions` payload Bosun reads (Slack sends more; the rest is ignored). */
const BlockActions = z.object({
  type: z.literal('block_actions'),
  user: z.object({ id: z.string().min(1), team_id: z.string().optional() }),
  team: z
    .object({ id: z.string().min(1) })
    .nullable()
    .optional(),
  container: z.object({ channel_id: z.string().optional(), message_ts: z.string().optional() }).optional(),
  channel: z
    .object({ id: z.string().min(1) })
    .nullable()
    .optional(),
  message: z.object({ ts: z.string().optional(), blocks: z.array(z.record(z.string(), z.unknown())).optional() }).optional(),
  actions: z.array(z.object({ action_id: z.string(), value: z.string().optional(), block_id: z.string().optional() })),
});
type BlockActions = z.infer<typeof BlockActions>;

/**
 * Who updates an approval's message: `claim` answers true once per approval (across processes
 * and restarts: a Redis key written with SET NX in the intake), false ever after.
 */
export interface SlackMessageUpdates {
  claim(approvalId: string): Promise<boolean>;
}

/** {@link SlackMessageUpdates} in one process's memory: for tests of a single process. */
export class MemoryMessageUpdates implements SlackMessageUpdates {
  private readonly claimed = new Set<string>();
  claim(approvalId: string): Promise<boolean> {
    const first = !this.claimed.has(approvalId);
    this.claimed.add(approvalId);
    return Promise.resolve(first);
  }
}

/** {@link SlackMessageUpdates} in Redis: `<prefix>:slack:updated:<approvalId>`, SET NX, kept as long as the approval (30 days). */
export class RedisMessageUpdates implements SlackMessageUpdates {
  constructor(private readonly options: { redis: RedisClient; prefix: string }) {}

  async claim(approvalId: string): Promise<boolean> {
    const key = keys.slackMessageUpdated(this.options.prefix, approvalId);
    return (await this.options.redis.set(key, new Date().toISOString(), 'EX', UPDATED_TTL_SECONDS, 'NX')) === 'OK';
  }
}

/** How long the claim of an approval's message update is kept: as long as the approval. */
const UPDATED_TTL_SECONDS = 30 * 24 * 3600;

/** What the route needs. */
export interface SlackInteractionsOptions {
  /** The Slack app sinks (resolved), by name: a request signed by one's secret acts for it. */
  sinks: Record<string, SlackAppSink>;
  approvals: Pick<ApprovalStore, 'decide' | 'get'>;
  /** Who updates each approval's message, once; default {@link MemoryMessageUpdates} (one process only). */
  updates?: SlackMessageUpdates;
  events: EventSink;
  log: Logger;
  /** The clock of the signature's timestamp check; default `Date.now`. */
  now?: () => number;
  /**
   * Whether an operator may decide approvals (holds the `approve` role). Absent: every mapped
   * user may (the sink's `users` / `emails` maps are then the whole list of who decides).
   */
  mayApprove?: (operator: string) => boolean;
}

/**
 * Whether an operator may decide approvals in Slack: when the config names its operators, only
 * those holding the `approve` role (a name the sink maps to that is not an operator cannot occur:
 * the config check refuses it); without operators, undefined: every mapped user may, as the
 * sink's maps are then the whole list of who decides.
 */
export function slackRoleCheck(operators: readonly OperatorEntry[]): ((operator: string) => boolean) | undefined {
  const people = new OperatorDirectory({ operators });
  if (!people.named) return undefined;
  return (operator) => people.byName(operator)?.roles.includes('approve') === true;
}

/** The operator a Slack user decides as (and the e-mail it was found by), or undefined when unmapped. */
async function operatorOf(sink: SlackAppSink, api: SlackApi, userId: string): Promise<{ name: string; email?: string } | undefined> {
  if (Object.hasOwn(sink.users, userId)) return { name: sink.users[userId]! };
  if (Object.keys(sink.emails).length === 0) return undefined;
  const email = (await api.userEmail(userId))?.toLowerCase();
  return email !== undefined && Object.hasOwn(sink.emails, email) ? { name: sink.emails[email]!, email } : undefined;
}

/** The message's blocks as decided: the clicked message's own, its buttons removed, and who decided (or, without them, built anew). */
function updatedBlocks(payload: BlockActions, approval: Approval, by: DecidedBy): SlackBlock[] {
  const fresh = decidedBlocks(approval, undefined, by);
  const shown = payload.message?.blocks;
  if (!shown || shown.length === 0) return fresh;
  const kept = shown.filter((b) => b.block_id !== ACTIONS_BLOCK && b.type !== 'actions' && b.type !== 'context');
  return [...kept, fresh[fresh.length - 1]!];
}

/** The message a click came from: the sink's Web API, the payload, and where the message is. */
interface ClickedMessage {
  api: SlackApi;
  payload: BlockActions;
  channel: string | undefined;
  ts: string | undefined;
}

/** The handler of {@link SLACK_INTERACTIONS_PATH}. */
export class SlackInteractions {
  private readonly names: string[];
  private readonly apis = new Map<string, SlackApi>();
  private readonly updates: SlackMessageUpdates;

  constructor(private readonly options: SlackInteractionsOptions) {
    this.names = Object.keys(options.sinks);
    this.updates = options.updates ?? new MemoryMessageUpdates();
    // Slack wants the answer within 3 s: each call of ours is held shorter.
    for (const [name, sink] of Object.entries(options.sinks)) this.apis.set(name, slackApiFor(sink, options.log, 2_500));
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { log } = this.options;
    const body = await readBounded(req, MAX_BODY_BYTES);
    if (body.tooLarge) return sendJson(res, 413, { error: `request body larger than ${MAX_BODY_BYTES} bytes` }, { connection: 'close' });
    const secrets = this.names.map((n) => this.options.sinks[n]!.signingSecret);
    const verified = verifySlackRequest(secrets, req.headers, body.text, (this.options.now ?? Date.now)());
    if (!verified.ok) {
      log.warn({ reason: verified.reason }, 'slack interaction refused');
      return sendJson(res, 401, { error: `unauthorized: ${verified.reason}` });
    }
    const sinkName = this.names[verified.index]!;
    const payload = parsePayload(body.text);
    if (typeof payload === 'string') {
      log.warn({ sink: sinkName, reason: payload }, 'slack interaction not understood');
      return sendJson(res, 400, { error: payload });
    }
    if (payload !== null) await this.act(sinkName, payload, req.socket.remoteAddress);
    res.writeHead(200).end();
  }

  /** One click: the user mapped, the approval decided, the message updated — or the clicker told why not. */
  private async act(sinkName: string, payload: BlockActions, address: string | undefined): Promise<void> {
    const action = payload.actions.find((a) => a.action_id === APPROVE_ACTION || a.action_id === DENY_ACTION);
    if (!action || !action.value) return;
    const sink = this.options.sinks[sinkName]!;
    const api = this.apis.get(sinkName)!;
    const userId = payload.user.id;
    const teamId = payload.user.team_id ?? payload.team?.id ?? '';
    const channel = payload.container?.channel_id ?? payload.channel?.id;
    const ts = payload.container?.message_ts ?? payload.message?.ts;
    const tell = (text: string) => this.tell(api, channel, userId, text);
    const approvalId = action.value;
    let operator: Awaited<ReturnType<typeof operatorOf>>;
    try {
      operator = await operatorOf(sink, api, userId);
    } catch (err) {
      if (!(err instanceof SlackApiError)) throw err;
      this.options.log.warn({ err, sink: sinkName, userId }, 'could not read a Slack user to map them to an operator');
      // Slack answers `user_not_found` for a user it does not show us: that is an unmapped user.
      if (err.slackError !== 'user_not_found')
        return tell(
          `Bosun could not check who you are (Slack ${err.method}: ${err.slackError}), so your click decided nothing. Try again.`,
        );
      operator = undefined;
    }
    if (operator === undefined) {
      this.options.log.warn(
        { sink: sinkName, userId, teamId, approvalId },
        'slack decision refused: the user is not mapped to an operator',
      );
      return tell(
        `You are not mapped to a Bosun operator, so your click decided nothing. Ask an admin to add your Slack user (${userId}) to the sink's users.`,
      );
    }
    if (this.options.mayApprove && !this.options.mayApprove(operator.name)) {
      this.options.log.warn({ sink: sinkName, userId, operator: operator.name, approvalId }, 'slack decision refused: no approve role');
      return tell(`You decide as ${operator.name}, who does not have the approve role, so your click decided nothing.`);
    }
    // Verified: Slack signed the request, and the config maps this Slack user to the operator.
    const actor: Actor = {
      name: operator.name,
      verified: true,
      path: 'slack',
      slack: { teamId, userId },
      ...(operator.email !== undefined ? { email: operator.email } : {}),
      ...(address !== undefined ? { address } : {}),
    };
    const decision: Decision =
      action.action_id === APPROVE_ACTION
        ? { approve: true, by: actor.name, actor }
        : { approve: false, reason: `denied in Slack by ${actor.name}`, by: actor.name, actor };
    let decided: Approval;
    try {
      decided = await this.options.approvals.decide(approvalId, decision);
    } catch (err) {
      if (!(err instanceof ApprovalError)) throw err;
      this.options.log.info({ approvalId, by: actor.name, code: err.code }, 'slack decision refused');
      await tell(err.code === 'already_decided' ? `Not recorded: ${err.message}.` : `Not recorded: ${err.message}`);
      if (err.code === 'already_decided') await this.updateLate({ api, payload, channel, ts }, approvalId);
      return;
    }
    this.options.log.info(
      {
        approvalId,
        decision: decided.status,
        by: actor.name,
        path: 'slack',
        slackUserId: userId,
        slackTeamId: teamId,
        runId: decided.runId,
      },
      'approval decided in Slack',
    );
    this.options.events.emit(approvalResolvedEvent(decided));
    await this.update({ api, payload, channel, ts }, decided, { name: actor.name, path: 'slack', slackUserId: userId });
  }

  /**
   * The message of an approval found decided when clicked: updated by this click when nobody has
   * updated it yet (its decider's process died before it could, or the decision came from the
   * CLI, the HTTP API, the console or A2A), so its buttons do not stay on a decided approval.
   */
  private async updateLate(message: ClickedMessage, approvalId: string): Promise<void> {
    const decided = await this.options.approvals.get(approvalId);
    if (!decided || decided.status === 'pending') return;
    const slackUserId = decided.actor?.slack?.userId;
    const by: DecidedBy = {
      name: decided.decidedBy ?? 'unknown',
      path: decided.actor?.path ?? 'bosun',
      ...(slackUserId !== undefined ? { slackUserId } : {}),
    };
    await this.update(message, decided, by);
  }

  /** Updates the message to say who decided, when this process is the first to claim it; a failure is logged (the decision stands). */
  private async update({ api, payload, channel, ts }: ClickedMessage, decided: Approval, by: DecidedBy): Promise<void> {
    if (channel === undefined || ts === undefined) return;
    if (!(await this.updates.claim(decided.id))) return;
    await api
      .update({ channel, ts, text: decidedText(decided, by), blocks: updatedBlocks(payload, decided, by) })
      .catch((err: unknown) =>
        this.options.log.warn({ err, approvalId: decided.id }, 'approval decided, but its Slack message could not be updated'),
      );
  }

  /** An ephemeral message to the clicker; a failure is logged (the click's outcome stands). */
  private async tell(api: SlackApi, channel: string | undefined, user: string, text: string): Promise<void> {
    if (channel === undefined) {
      this.options.log.warn({ user }, 'slack interaction without a channel: the user could not be told why nothing was decided');
      return;
    }
    await api.postEphemeral({ channel, user, text }).catch((err: unknown) => {
      if (!(err instanceof SlackApiError)) throw err;
      this.options.log.warn({ err, user }, 'could not tell a Slack user why nothing was decided');
    });
  }
}

/** The form's `payload` as a `block_actions` payload; null for another type of interaction; a string saying what is wrong. */
function parsePayload(body: string): BlockActions | null | string {
  const raw = new URLSearchParams(body).get('payload');
  if (raw === null) return 'body: not a form with a payload field';
  let json: unknown;
  try {
    json = JSON.parse(raw) as unknown;
  } catch (err) {
    return `payload: not JSON (${(err as Error).message})`;
  }
  if (typeof json === 'object' && json !== null && (json as { type?: unknown }).type !== 'block_actions') return null;
  const parsed = BlockActions.safeParse(json);
  if (!parsed.success) return `payload: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(payload)'}: ${i.message}`).join('; ')}`;
  return parsed.data;
}
