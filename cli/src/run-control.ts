/**
 * Run control from the command line: `bosun runs [list]` and `bosun cancel`. The work is done by
 * `RunControl` (libs/transport), which the coordinator's operator API uses too.
 */
import { Job, Queue } from 'bullmq';
import { INCIDENTS_QUEUE, RunResult } from '@bosun/contract';
import type { BosunEnv } from '@bosun/config';
import { RUN_STATES, RunControl, RunControlError, type RunState, type RunSummary } from '@bosun/transport';
import { UsageError, integerOption, parseCommand, secondsOption } from './args.js';
import { OperatorError, formatAge, oneLine, type OperatorDeps } from './operator.js';
import { escapeControl, safeJson } from './terminal.js';

/** A parsed command, ready to run against Redis. */
export type OperatorCommand = (deps: OperatorDeps) => Promise<number>;

async function withRuns<T>(deps: OperatorDeps, fn: (runs: RunControl) => Promise<T>): Promise<T> {
  const runs = new RunControl({ redis: deps.redis, prefix: deps.prefix });
  try {
    return await fn(runs);
  } finally {
    await runs.close();
  }
}

/** `bosun runs [list] [--status <state>] [--limit <n>] [--json]`. */
export function runsListCommand(args: string[]): OperatorCommand {
  const { values } = parseCommand(
    'runs list',
    args,
    { status: { type: 'string' }, limit: { type: 'string', default: '50' }, json: { type: 'boolean', default: false } },
    0,
  );
  const status = values.status;
  if (status !== undefined && !(RUN_STATES as readonly string[]).includes(status)) {
    throw new UsageError(`runs list: --status must be one of ${RUN_STATES.join(', ')} (got "${status}")`);
  }
  const limit = integerOption('runs list', 'limit', values.limit, 1, 1000);
  return async (deps) => {
    const runs = await withRuns(deps, (r) => r.list({ limit, ...(status ? { state: status as RunState } : {}) }));
    process.stdout.write(`${values.json ? safeJson(runs) : escapeControl(formatRuns(runs), { keepNewlines: true })}\n`);
    return 0;
  };
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

/** How long `bosun cancel` waits, by default, for the run to end. */
const CANCEL_WAIT_S = 15;

/**
 * `bosun cancel <runId> [--reason <text>] [--by <name>] [--wait <s>]`: records the cancellation,
 * then waits (15 s by default; `--wait 0` not at all) for the run to end. Exit 0 once it has ended
 * cancelled (or was already), 3 when it has not ended yet, 1 for an unknown or finished run.
 * `--by` defaults to `USER` (`env.user`), else `operator`.
 */
export function cancelCommand(args: string[], env: Pick<BosunEnv, 'user'>): OperatorCommand {
  const { values, positionals } = parseCommand(
    'cancel',
    args,
    { reason: { type: 'string' }, by: { type: 'string' }, wait: { type: 'string', default: String(CANCEL_WAIT_S) } },
    1,
  );
  const runId = positionals[0];
  if (!runId) throw new UsageError('cancel needs a run id (see bosun runs list)');
  const reason = values.reason?.trim() || 'no reason given';
  if (values.reason !== undefined && values.reason.trim() === '') throw new UsageError('cancel: --reason needs a text (or leave it out)');
  const by = values.by?.trim() || env.user || 'operator';
  const waitS = values.wait === '0' ? 0 : secondsOption('cancel', 'wait', values.wait, 3600);
  return async (deps) => {
    let outcome;
    try {
      outcome = await withRuns(deps, (r) => r.cancel(runId, { by, reason }));
    } catch (err) {
      if (err instanceof RunControlError) throw new OperatorError(`cancel: ${err.message}`, err.code === 'bad_request' ? 2 : 1);
      throw err;
    }
    const c = outcome.cancelled;
    const who = `by ${c.by} at ${c.at}: ${c.reason}`;
    if (outcome.state === 'cancelled') {
      process.stdout.write(escapeControl(`run ${runId} (incident ${outcome.incidentId}) was already cancelled ${who}`) + '\n');
      return 0;
    }
    process.stderr.write(
      escapeControl(
        `${outcome.already ? 'already cancelling' : 'cancelling'} run ${runId} (incident ${outcome.incidentId}, ${outcome.state}) ${who}`,
      ) + '\n',
    );
    const ended = await waitForEnd(deps, outcome.incidentId, waitS * 1000);
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
    process.stdout.write(
      escapeControl(`run ${runId} cancelled ${who}; not finished: ${open.length > 0 ? open.join(', ') : 'none'}`) + '\n',
    );
    return 0;
  };
}

/** How the incident job stands after waiting up to `ms` for it to finish. */
async function waitForEnd(
  deps: OperatorDeps,
  incidentId: string,
  ms: number,
): Promise<{ kind: 'result'; result: RunResult } | { kind: 'failed'; reason: string } | { kind: 'pending' }> {
  const queue = new Queue(INCIDENTS_QUEUE, { connection: deps.redis, prefix: deps.prefix });
  try {
    const until = Date.now() + ms;
    for (;;) {
      const job = await Job.fromId(queue, incidentId);
      if (!job) return { kind: 'failed', reason: 'the job is gone' };
      const state = await job.getState();
      if (state === 'completed') {
        const parsed = RunResult.safeParse(job.returnvalue);
        return parsed.success ? { kind: 'result', result: parsed.data } : { kind: 'failed', reason: 'its result does not parse' };
      }
      if (state === 'failed') return { kind: 'failed', reason: job.failedReason ?? '' };
      if (Date.now() >= until) return { kind: 'pending' };
      await new Promise((r) => setTimeout(r, 200));
    }
  } finally {
    await queue.close();
  }
}
