/**
 * Run control from the command line: `bosun runs [list]`, `bosun runs show` and `bosun cancel`.
 * Listing and cancelling are done by `RunControl` (libs/transport), which the coordinator's
 * operator API uses too; `runs show` reads the run's checkpoints (`run-view.ts`).
 */
import { Job, Queue } from 'bullmq';
import { INCIDENTS_QUEUE, RunResult, describeIssues, sleep } from '@bosun/contract';
import { RUN_STATES, RunControl, RunControlError, type CancelOutcome, type RunSummary } from '@bosun/transport';
import { UsageError, integerOption, secondsOption } from '../args.js';
import { commandGroup, defineRedisCommand, type RedisDeps } from '../command.js';
import { OperatorError, formatAge, oneLine, type OperatorDeps, type OperatorReason } from '../operator.js';
import { showRun, type DelegationView, type RunView } from '../run-view.js';
import { escapeControl, printJson, printText, reportProblems, safeJson } from '../terminal.js';
import { TOKEN_FILE_OPTION, cliIdentity } from '../identity.js';

/** Why the run control refused a cancel, as an operator's error. */
const RUN_CONTROL_REASON: Record<RunControlError['code'], OperatorReason> = {
  not_found: 'not_found',
  finished: 'conflict',
  bad_request: 'bad_request',
};

async function withRuns<T>(deps: OperatorDeps, fn: (runs: RunControl) => Promise<T>): Promise<T> {
  const runs = new RunControl({ redis: deps.redis, prefix: deps.prefix });
  try {
    return await fn(runs);
  } finally {
    await runs.close();
  }
}

/** The text of `bosun runs list`. */
export function formatRuns(runs: RunSummary[], now = Date.now()): string {
  if (runs.length === 0) return 'no runs';
  const state = (r: RunSummary) => (r.cancelRequested ? `${r.state} (cancelling)` : r.state);
  const wInc = Math.max(8, ...runs.map((r) => r.incidentId.length));
  const wState = Math.max(5, ...runs.map((r) => state(r).length));
  const lines = [`${'run'.padEnd(21)}  ${'incident'.padEnd(wInc)}  ${'state'.padEnd(wState)}  ${'age'.padEnd(7)}  specialists`];
  for (const r of runs) {
    const specialists = r.specialists.length > 0 ? r.specialists.join(', ') : '-';
    const reason = r.reason ? `  (${oneLine(r.reason, 80)})` : '';
    lines.push(
      `${r.runId.padEnd(21)}  ${r.incidentId.padEnd(wInc)}  ${state(r).padEnd(wState)}  ${formatAge(now - Date.parse(r.createdAt)).padEnd(7)}  ${specialists}${reason}`,
    );
  }
  return lines.join('\n');
}

const list = defineRedisCommand({
  name: 'list',
  label: 'runs list',
  usage: `  bosun runs [list] [--status <state>] [--limit N] [--json]
                                    runs, newest first: id, incident, state (waiting, active, parked,
                                    completed, partial, failed, cancelled), age, specialists`,
  options: { status: { type: 'string' }, limit: { type: 'string', default: '50' }, json: { type: 'boolean', default: false } },
  positionals: 0,
  check({ values }) {
    const status = RUN_STATES.find((s) => s === values.status);
    if (values.status !== undefined && status === undefined) {
      throw new UsageError(`runs list: --status must be one of ${RUN_STATES.join(', ')} (got "${values.status}")`);
    }
    return { status, json: values.json, limit: integerOption('runs list', 'limit', values.limit, { min: 1, max: 1000 }) };
  },
  async handler({ status, json, limit }, deps) {
    const runs = await withRuns(deps, (r) => r.list({ limit, ...(status ? { state: status } : {}) }));
    process.stdout.write(`${json ? safeJson(runs) : escapeControl(formatRuns(runs), { keepNewlines: true })}\n`);
    return 0;
  },
});

/** The lines of one delegation in `bosun runs show`. */
function delegationLines(d: DelegationView): string[] {
  const lines: string[] = [];
  const progress = [d.step !== undefined ? `step ${d.step}` : '', d.toolRounds !== undefined ? `${d.toolRounds} tool rounds` : '']
    .filter(Boolean)
    .join(', ');
  lines.push(`${d.agent.padEnd(14)} ${d.status.padEnd(10)} ${d.taskId}${progress ? `  (${progress})` : ''}`);
  if (d.checkpointError) lines.push(`    ! ${d.checkpointError}`);
  if (d.pending) {
    const at = d.pending.step !== undefined ? ` at step ${d.pending.step}` : '';
    // Saved before the round went out, and not again until the next effect: the records below
    // say how far its calls got.
    if (d.pending.kind === 'tools')
      lines.push(`    last saved before tool calls${at}: ${(d.pending.keys ?? []).join(', ') || '(no keys)'}`);
    else if (d.pending.kind === 'model') lines.push(`    pending: model call${at}`);
    else lines.push(`    pending: ${d.pending.kind}${at}`);
  }
  for (const c of d.toolCalls) {
    // The metric's word for it (ok, tool_error, error, in_doubt): the same as the console's.
    const outcome = c.outcome ? ` ${c.outcome}` : '';
    const seen = c.seenDoneAt ? ' (in doubt, later seen done)' : '';
    lines.push(`    ${c.state.padEnd(9)} ${c.key}  ${c.tool ?? '?'}${outcome}${c.error ? `: ${oneLine(c.error, 80)}` : ''}${seen}`);
  }
  return lines;
}

/** The text of `bosun runs show`. */
export function formatRun(view: RunView): string {
  const lines: string[] = [];
  lines.push(`run ${view.runId}${view.incidentId ? ` (incident ${view.incidentId})` : ''}`);
  lines.push(
    `  phase:     ${view.phase ?? '?'}${view.mode ? ` (${view.mode} mode${view.round !== undefined ? `, round ${view.round}` : ''})` : ''}`,
  );
  if (view.status) lines.push(`  status:    ${view.status}`);
  lines.push(`  started:   ${view.startedAt ?? '?'}`);
  lines.push(`  deadline:  ${view.deadlineAt ?? '?'}`);
  lines.push('');
  if (view.delegations.length === 0) lines.push('no delegations yet');
  for (const d of view.delegations) lines.push(...delegationLines(d));
  lines.push('');
  if (view.inDoubt.length === 0) lines.push('in doubt: none');
  else {
    lines.push(`in doubt (${view.inDoubt.length}): resolve each with bosun ack <key> --done|--retry|--skip`);
    for (const c of view.inDoubt) {
      // Declared in doubt, and its outcome recorded after all: known now, to acknowledge.
      const seen = c.laterSeen
        ? `  — later seen done: ${c.laterSeen.status} at ${c.laterSeen.at}${c.laterSeen.acknowledged ? ', acknowledged' : '; acknowledge with bosun ack <key> --done'}`
        : '';
      lines.push(`  ${c.key}  ${c.tool ?? '?'} ${JSON.stringify(c.args ?? {})}${seen}`);
    }
  }
  return lines.join('\n');
}

const show = defineRedisCommand({
  name: 'show',
  label: 'runs',
  usage: `  bosun runs show <runId> [--json]  a run's state from its checkpoints: delegations, pending steps,
                                    tool calls, and the calls in doubt`,
  options: { json: { type: 'boolean', default: false } },
  positionals: 1,
  check({ values, positionals }) {
    const runId = positionals[0];
    if (!runId) throw new UsageError('runs show needs a run id');
    return { runId, json: values.json };
  },
  async handler({ runId, json }, deps) {
    const view = await showRun(deps, runId);
    if (json) printJson(view);
    else printText(formatRun(view));
    return reportProblems(view.problems);
  },
});

/** `bosun runs`: list (the default), show. */
export const runsCommand = commandGroup('runs', [list, show], 'list');

/** How the incident job stands after waiting up to `ms` for it to finish. */
type RunEnd = { kind: 'result'; result: RunResult } | { kind: 'failed'; reason: string } | { kind: 'pending' };

async function waitForEnd(deps: OperatorDeps, incidentId: string, ms: number): Promise<RunEnd> {
  const queue = new Queue(INCIDENTS_QUEUE, { connection: deps.redis, prefix: deps.prefix });
  try {
    const until = Date.now() + ms;
    for (;;) {
      const job = await Job.fromId(queue, incidentId);
      if (!job) return { kind: 'failed', reason: 'the job is gone' };
      const state = await job.getState();
      if (state === 'completed') {
        const parsed = RunResult.safeParse(job.returnvalue);
        return parsed.success
          ? { kind: 'result', result: parsed.data }
          : { kind: 'failed', reason: `its result does not parse: ${describeIssues(parsed.error).issues.join('; ')}` };
      }
      if (state === 'failed') return { kind: 'failed', reason: job.failedReason ?? '' };
      if (Date.now() >= until) return { kind: 'pending' };
      await sleep(200);
    }
  } finally {
    await queue.close();
  }
}

/** How long `bosun cancel` waits, by default, for the run to end. */
const CANCEL_WAIT_S = 15;

/** Records the cancellation; a refusal of `RunControl` is reported as is (exit 2 for a bad request, else 1). */
async function requestCancel(deps: OperatorDeps, runId: string, who: { by: string; reason: string }): Promise<CancelOutcome> {
  try {
    return await withRuns(deps, (r) => r.cancel(runId, who));
  } catch (err) {
    if (err instanceof RunControlError) throw new OperatorError(RUN_CONTROL_REASON[err.code], `cancel: ${err.message}`, err);
    throw err;
  }
}

/** Prints how a cancelled run ended and returns the exit code: 0 ended cancelled, 3 not ended yet, 1 otherwise. */
function reportEnd(runId: string, who: string, ended: RunEnd): number {
  if (ended.kind === 'pending') {
    process.stdout.write(
      `run ${runId}: the cancellation is recorded; the run has not ended yet (a coordinator ends it at its next step)\n`,
    );
    return 3;
  }
  if (ended.kind === 'failed') {
    process.stdout.write(escapeControl(`run ${runId}: its incident job failed: ${ended.reason}`) + '\n');
    return 1;
  }
  const end = ended.result;
  if (end.status !== 'cancelled') {
    process.stdout.write(`run ${runId} finished ${end.status} before the cancellation took effect\n`);
    return 1;
  }
  const open = end.specialists.filter((s) => s.status !== 'completed').map((s) => s.name);
  process.stdout.write(escapeControl(`run ${runId} cancelled ${who}; not finished: ${open.length > 0 ? open.join(', ') : 'none'}`) + '\n');
  return 0;
}

/**
 * `bosun cancel <runId> [--reason <text>] [--by <name>] [--wait <s>]`: records the cancellation,
 * then waits (15 s by default; `--wait 0` not at all) for the run to end. Exit 0 once it has ended
 * cancelled (or was already), 3 when it has not ended yet, 1 for an unknown or finished run.
 * `--by` defaults to `USER` (`env.user`), else `operator`.
 */
export const cancelCommand = defineRedisCommand({
  name: 'cancel',
  usage: `  bosun cancel <runId> [--reason "…"] [--by <name>] [--wait <s>] [--token-file <f>]
                                    cancel a run: specialists stop before their next effect, and
                                    the run ends cancelled, naming what was not finished; waits
                                    up to 15 s for the end (exit 3 if it has not ended yet)`,
  options: {
    reason: { type: 'string' },
    by: { type: 'string' },
    wait: { type: 'string', default: String(CANCEL_WAIT_S) },
    ...TOKEN_FILE_OPTION,
  },
  positionals: 1,
  check({ values, positionals }, env) {
    const runId = positionals[0];
    if (!runId) throw new UsageError('cancel needs a run id (see bosun runs list)');
    const reason = values.reason?.trim() || 'no reason given';
    if (values.reason !== undefined && values.reason.trim() === '') throw new UsageError('cancel: --reason needs a text (or leave it out)');
    const waitS = values.wait === '0' ? 0 : secondsOption('cancel', 'wait', values.wait, 3600);
    const typed = values.by?.trim() || env.user || 'operator';
    // A verified caller cancels under their own name (BOSUN_TOKEN), whatever --by says.
    const by = cliIdentity(env, { role: 'cancel', what: `cancelling run ${runId}`, tokenFile: values['token-file'], by: typed }).actor.name;
    return { runId, reason, by, waitS };
  },
  async handler({ runId, reason, by, waitS }, deps: RedisDeps) {
    const outcome = await requestCancel(deps, runId, { by, reason });
    const c = outcome.cancelled;
    const who = `by ${c.by} at ${c.at}: ${c.reason}`;
    if (outcome.state === 'cancelled') {
      process.stdout.write(escapeControl(`run ${runId} (incident ${outcome.incidentId}) was already cancelled ${who}`) + '\n');
      return 0;
    }
    const doing = outcome.already ? 'already cancelling' : 'cancelling';
    process.stderr.write(escapeControl(`${doing} run ${runId} (incident ${outcome.incidentId}, ${outcome.state}) ${who}`) + '\n');
    return reportEnd(runId, who, await waitForEnd(deps, outcome.incidentId, waitS * 1000));
  },
});
