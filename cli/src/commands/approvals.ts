/**
 * Approvals of tool calls: `bosun approvals [list|show]`, `bosun approve` and `bosun deny`. The
 * approvals are read and decided through `ApprovalStore` (libs/transport), which parses them with
 * the contract's `Approval`; a decision is checked by the contract's `parseDecision`.
 */
import {
  DecisionError,
  approvalDecisions,
  approvalProgress,
  parseDecision,
  type Actor,
  type Approval,
  type ApprovalDecisionEntry,
  type ApprovalReadContext,
  type Decision,
  errorMessage,
  sleep,
} from '@bosun/contract';
import { createLogger, type BosunEnv } from '@bosun/config';
import {
  ApprovalError,
  ApprovalReader,
  ApprovalStore,
  EventPublisher,
  approvalResolvedEvent,
  connectNats,
  ensureRunsStream,
} from '@bosun/transport';
import { UsageError } from '../args.js';
import { commandGroup, defineRedisCommand, type RedisDeps } from '../command.js';
import { TOKEN_FILE_OPTION, cliIdentity, cliViewer } from '../identity.js';
import { OperatorError, formatAge, oneLine, type OperatorDeps } from '../operator.js';
import { printJson, printText } from '../terminal.js';

/** Runs `fn` with an approval store on the shared connection, and closes it. */
async function withApprovals<T>(deps: OperatorDeps, fn: (store: ApprovalStore) => Promise<T>): Promise<T> {
  const store = new ApprovalStore({ redis: deps.redis, prefix: deps.prefix });
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

const ARGS_MAX = 200;
const STEP_MAX = 160;

/** `1 of 2 approvals (alice)`: how far an approval under a rule of several people has got. */
export function votesLine(a: Approval): string {
  const votes = a.votes ?? [];
  const who = votes.length > 0 ? ` (${votes.map((v) => v.actor.name).join(', ')})` : '';
  const requester = a.rule?.distinctFrom === 'requester' ? `; not ${a.requester ?? 'the requester'}` : '';
  return `${approvalProgress(a).text} approvals${who}${requester}`;
}

/** One decision as a line: `approve by alice (verified, slack) at 2026-…`. */
export function decisionLine(d: ApprovalDecisionEntry): string {
  const how = d.path ? ` (${d.verified ? 'verified' : 'unverified'}, ${d.path})` : '';
  const why = d.reason !== undefined && d.decision !== 'timeout' ? `: ${oneLine(d.reason, 200)}` : '';
  return `${d.decision} by ${d.name}${how} at ${d.at}${why}`;
}

/** The run so far, a line a step: `demo__get_pods {"ns":"payments"} -> {"pods":[…]}`. */
function stepLines(a: Approval): string[] {
  if (!a.steps || a.steps.length === 0) return [];
  return [
    `    so far (${a.steps.length} ${a.steps.length === 1 ? 'step' : 'steps'}):`,
    ...a.steps.map(
      (st) => `      ${st.tool} ${oneLine(JSON.stringify(st.args), 80)} -> ${st.isError ? 'error: ' : ''}${oneLine(st.result, STEP_MAX)}`,
    ),
  ];
}

/** The run's other specialists, a line each: `database completed: the pool is exhausted`. */
function specialistLines(a: ApprovalReadContext): string[] {
  if (a.specialistsProblem) return [`    other specialists: unreadable (${oneLine(a.specialistsProblem, 200)})`];
  if (!a.specialists || a.specialists.length === 0) return [];
  return [
    '    other specialists:',
    ...a.specialists.map((s) => `      ${s.agent} ${s.status}${s.finding ? `: ${oneLine(s.finding, STEP_MAX)}` : ''}`),
  ];
}

/** Who has looked at it: `seen by: alice (console) 2026-…, bob (cli) 2026-…`. */
function viewerLine(a: ApprovalReadContext): string[] {
  if (!a.viewers || a.viewers.length === 0) return [];
  return [`    seen by: ${a.viewers.map((v) => `${oneLine(v.name, 100)} (${v.path}) ${v.at}`).join(', ')}`];
}

/** The text of `bosun approvals list`: each approval, with the context read beside it when there is some. */
export function formatApprovals(approvals: (Approval & ApprovalReadContext)[], now = Date.now()): string {
  if (approvals.length === 0) return 'no pending approvals';
  const lines: string[] = [];
  for (const a of approvals) {
    const age = formatAge(now - Date.parse(a.createdAt));
    lines.push(`${a.id}  age ${age}  run ${a.runId}  agent ${a.agent}  times out ${a.timeoutAt}`);
    const i = a.incident;
    if (i)
      lines.push(
        `    incident: ${i.id} [${i.severity}] ${oneLine(i.title, 200)}${i.service ? `  service ${i.service}` : ''}  source ${i.source}`,
      );
    lines.push(...specialistLines(a));
    lines.push(...stepLines(a));
    lines.push(`    reason: ${oneLine(a.reason || '(none given)', 300)}`);
    if (a.rule) lines.push(`    needs: ${votesLine(a)}`);
    for (const d of approvalDecisions(a)) lines.push(`    ${decisionLine(d)}`);
    lines.push(...viewerLine(a));
    for (const c of a.calls) {
      lines.push(`    [${c.index}] ${c.tool} ${oneLine(JSON.stringify(c.args), ARGS_MAX)}${c.needsApproval ? '   <- needs approval' : ''}`);
    }
    lines.push('');
  }
  const ask = approvals.reduce((n, a) => n + a.calls.filter((c) => c.needsApproval).length, 0);
  lines.push(`${approvals.length} pending (${ask} calls need approval): bosun approve <id> [--only i,j] | bosun deny <id> --reason "…"`);
  return lines.join('\n');
}

const list = defineRedisCommand({
  name: 'list',
  label: 'approvals',
  usage: `  bosun approvals [list] [--json]   pending approvals of tool calls, oldest first: each call as
                                    [i] tool args, marking those that need approval`,
  options: { json: { type: 'boolean', default: false } },
  positionals: 0,
  check: ({ values }) => ({ json: values.json }),
  async handler({ json }, deps) {
    // A list records no viewer: listing is not looking at one approval.
    const pending = await withApprovals(deps, async (store) => new ApprovalReader(deps).views(await store.pending()));
    if (json) printJson(pending);
    else printText(formatApprovals(pending));
    return 0;
  },
});

const show = defineRedisCommand({
  name: 'show',
  label: 'approvals',
  usage: `  bosun approvals show <id> [--token-file <f>]
                                    print one approval (JSON, with its progress, decisions, the
                                    run's other specialists and who has looked at it); with
                                    BOSUN_TOKEN (or --token-file) you are recorded as a viewer`,
  options: { ...TOKEN_FILE_OPTION },
  positionals: 1,
  check({ values, positionals }, env) {
    const id = positionals[0];
    if (!id) throw new UsageError('approvals show needs an approval id (see bosun approvals list)');
    return { id, viewer: cliViewer(env, values['token-file'], `reading approval ${id}`)?.actor };
  },
  async handler({ id, viewer }, deps) {
    const a = await withApprovals(deps, (store) => store.get(id));
    if (!a) throw new OperatorError('not_found', `no approval ${id} under BOSUN_PREFIX=${deps.prefix}`);
    printJson(await new ApprovalReader(deps).view(a, viewer));
    return 0;
  },
});

/** `bosun approvals`: list (the default), show. */
export const approvalsCommand = commandGroup('approvals', [list, show], 'list');

/**
 * The decision of `bosun approve` / `bosun deny` from its flags, checked by the contract's
 * `parseDecision` (as the HTTP API and the approval store check it); a refusal is a usage error
 * (exit 2) worded for the command line.
 */
function decisionFromFlags(command: 'approve' | 'deny', values: { only?: string; reason?: string; by?: string }, actor: Actor): Decision {
  // Indexes as numbers; anything else is left as written, for the check to refuse.
  const only = values.only?.split(',').map((p) => (/^\d+$/.test(p.trim()) ? Number(p.trim()) : p));
  try {
    return parseDecision(
      {
        decision: command,
        // A verified caller's --by is kept only as a note beside their name (parseDecision).
        ...(values.by === undefined ? {} : { by: values.by }),
        ...(only === undefined ? {} : { only }),
        ...(values.reason === undefined ? {} : { reason: values.reason }),
      },
      { actor },
    );
  } catch (err) {
    if (!(err instanceof DecisionError)) throw err;
    const flag = `${err.field}/${err.problem}`;
    if (flag === 'reason/not_allowed') throw new UsageError('approve: --reason is for deny');
    if (flag === 'only/invalid')
      throw new UsageError(`approve: --only takes call indexes separated by commas, like --only 0,2 (got "${values.only}")`);
    if (flag === 'only/not_allowed') throw new UsageError('deny: --only is for approve (a denial covers every call)');
    if (flag === 'reason/missing') throw new UsageError('deny needs --reason "…": the agent is told why');
    throw new UsageError(`${command}: --${err.message}`);
  }
}

/**
 * Publishes `approval.resolved` for a decision just made. Best effort: the decision stands
 * whatever happens here; when NATS is unreachable or the event is not stored, a warning says so.
 */
async function publishResolved(env: BosunEnv, deps: OperatorDeps, approval: Approval): Promise<void> {
  const warn = (why: string) =>
    process.stderr.write(
      `bosun: warning: the approval.resolved event for ${approval.id} could not be published (${why}); the decision is recorded\n`,
    );
  let nc;
  try {
    nc = await connectNats(env.nats, { name: 'bosun-cli' });
  } catch (err) {
    warn(errorMessage(err));
    return;
  }
  try {
    // The runs stream stores the event for late observers; the services create it, but this may
    // be the first event under the prefix. Not waited for past 5 s.
    await Promise.race([
      // A stream that cannot be made is not reported here: the event then counts as not published, and the warning below says so.
      ensureRunsStream(nc, env.prefix, { replicas: env.streamReplicas }).catch(() => undefined),
      sleep(5_000, undefined, { unref: true }),
    ]);
    const log = createLogger({ service: 'bosun-cli', level: 'error', destination: process.stderr });
    const events = new EventPublisher({ prefix: env.prefix, redis: deps.redis, nats: nc, log });
    events.emit(approvalResolvedEvent(approval));
    await events.flush();
    if (events.stats.published === 0) warn('NATS did not store it in time');
  } finally {
    // Closing after the event went out (or not): a failure to close changes nothing.
    await nc.close().catch(() => undefined);
  }
}

/**
 * `bosun approve` / `bosun deny`: decides a pending approval, once, and wakes the parked task.
 * Refusals are {@link OperatorError}s: no such approval or already decided (exit 1), a decision
 * the approval does not allow, such as `--only` naming calls that need no approval (exit 2).
 */
async function decide(deps: RedisDeps, id: string, decision: Decision): Promise<number> {
  const a = await withApprovals(deps, async (store) => {
    try {
      return await store.decide(id, decision);
    } catch (err) {
      if (!(err instanceof ApprovalError)) throw err;
      if (err.code === 'not_found') throw new OperatorError('not_found', `no approval ${id} under BOSUN_PREFIX=${deps.prefix}`, err);
      throw new OperatorError(
        err.code === 'bad_request' ? 'bad_request' : err.code === 'forbidden' ? 'forbidden' : 'conflict',
        err.message,
        err,
      );
    }
  });
  if (a.status === 'pending') {
    // A vote toward a rule of several people that leaves it short: nothing runs yet.
    process.stdout.write(`approval ${a.id}: approval by ${decision.by} recorded: ${votesLine(a)}\n`);
    return 0;
  }
  const what = a.status === 'approved' ? `approved (calls ${(a.approved ?? []).join(', ')})` : `denied (${a.denyReason ?? ''})`;
  process.stdout.write(`approval ${a.id} ${what} by ${a.decidedBy ?? decision.by} at ${a.decidedAt ?? '?'}\n`);
  await publishResolved(deps.env, deps, a);
  return 0;
}

/** `bosun approve` or `bosun deny`: the same options, checked for the one or the other. */
function decisionCommand(command: 'approve' | 'deny', usage: string) {
  return defineRedisCommand({
    name: command,
    usage,
    options: { only: { type: 'string' }, reason: { type: 'string' }, by: { type: 'string' }, ...TOKEN_FILE_OPTION },
    positionals: 1,
    check({ values, positionals }, env) {
      const id = positionals[0];
      if (!id) throw new UsageError(`${command} needs an approval id (see bosun approvals list)`);
      const by = values.by?.trim() || env.user || 'operator';
      const who = cliIdentity(env, { role: 'approve', what: `deciding approval ${id}`, tokenFile: values['token-file'], by });
      return { id, decision: decisionFromFlags(command, values, who.actor) };
    },
    handler: ({ id, decision }, deps) => decide(deps, id, decision),
  });
}

export const approveCommand = decisionCommand(
  'approve',
  `  bosun approve <id> [--only i,j] [--by <name>] [--token-file <f>]
                                    approve the calls needing approval (or only calls i, j); the
                                    parked task resumes and runs exactly those calls, once. Who
                                    you are: BOSUN_TOKEN (or --token-file), required when
                                    the config names operators; else --by (default $USER)`,
);

export const denyCommand = decisionCommand(
  'deny',
  `  bosun deny <id> --reason "…" [--by <name>] [--token-file <f>]
                                    deny them; the agent is told the reason and goes on without`,
);
