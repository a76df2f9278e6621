#!/usr/bin/env node
import { Job, Queue, QueueEvents } from 'bullmq';
import {
  DeadLetterKind,
  DecisionError,
  INCIDENTS_QUEUE,
  InvalidInputError,
  RUN_ID_PATTERN,
  parseDecision,
  runIdFor,
  type RunEvent,
  type RunResult,
} from '@bosun/contract';
import { createLogger, readEnv, ConfigError, type BosunEnv } from '@bosun/config';
import {
  EventPublisher,
  approvalResolvedEvent,
  connectNats,
  createRedis,
  ensureRunsStream,
  waitForRedis,
  type Approval,
  type Decision,
  type RedisClient,
} from '@bosun/transport';
import { SeqOrder, followEvents, formatEvent } from './events.js';
import { UsageError, parseCommand, secondsOption } from './args.js';
import { cancelCommand, runsListCommand } from './run-control.js';
import { escapeControl, exitAfterFlush, safeJson, watchOutputErrors } from './terminal.js';

/** How long `bosun watch <run>` waits for an event that another arrived ahead of. */
const WATCH_GAP_MS = 3_000;
import { publishOrReplace, readIncident, reportPublished } from './publish.js';
import { runDemo } from './demo.js';
import {
  OperatorError,
  ackToolCall,
  decideApproval,
  formatApprovals,
  formatAudit,
  listApprovals,
  readAudit,
  showApproval,
  dropDeadLetter,
  formatDeadLetters,
  formatRun,
  formatStats,
  listDeadLetters,
  readStats,
  retryDeadLetter,
  showDeadLetter,
  showRun,
  type OperatorDeps,
} from './operator.js';

const USAGE = `bosun — operate a Bosun cluster

Usage:
  bosun publish <file|->            validate an incident (JSON) and publish it; prints the run id. An
                                    incident whose job was rejected as poison is replaced by the new one
  bosun watch [runId] [--new]       follow run events (one run, in seq order; or all), replaying from the stream
  bosun result <incidentId> [--wait] [--timeout <s>]
                                    print an incident's run result (JSON)
  bosun dlq [list] [--json] [--kind <kind>]
                                    list the dead-letter queue, newest first
  bosun dlq show <jobId>            print one dead-letter entry (JSON)
  bosun dlq retry <jobId>           re-runs the work of a stall/timeout/failure entry: the one
                                    specialist task inside its run if the run is still open, else
                                    the incident as a new incident <id>-retry<n>; prints the run id
                                    (the entry stays, linked to it). Poison input must be fixed and
                                    published with bosun publish; in-doubt calls: bosun ack
  bosun dlq drop <jobId>            remove one entry (the only way an entry leaves the queue)
  bosun runs [list] [--status <state>] [--limit N] [--json]
                                    runs, newest first: id, incident, state (waiting, active, parked,
                                    completed, partial, failed, cancelled), age, specialists
  bosun runs show <runId> [--json]  a run's state from its checkpoints: delegations, pending steps,
                                    tool calls, and the calls in doubt
  bosun cancel <runId> [--reason "…"] [--by <name>] [--wait <s>]
                                    cancel a run: specialists stop before their next effect, and
                                    the run ends cancelled, naming what was not finished; waits
                                    up to 15 s for the end (exit 3 if it has not ended yet)
  bosun ack <key> --done|--retry|--skip [--by <name>]
                                    resolve an in-doubt tool call: it took effect (--done), treat
                                    it as not executed (--skip), or send it once more (--retry)
  bosun stats [--json]              degraded-result counters and dropped events
  bosun approvals [list] [--json]   pending approvals of tool calls, oldest first: each call as
                                    [i] tool args, marking those that need approval
  bosun approvals show <id>         print one approval (JSON)
  bosun approve <id> [--only i,j] [--by <name>]
                                    approve the calls needing approval (or only calls i, j); the
                                    parked task resumes and runs exactly those calls, once
  bosun deny <id> --reason "…" [--by <name>]
                                    deny them; the agent is told the reason and goes on without
  bosun audit [--run <runId>] [--limit N] [--json]
                                    the audit stream of mutating tool calls, newest first
  bosun demo [--once]               start a demo cluster and publish sample incidents

Environment: REDIS_URL, NATS_URL, BOSUN_PREFIX, BOSUN_CONFIG; TLS and credentials: REDIS_TLS_*_FILE,
REDIS_USERNAME, REDIS_PASSWORD_FILE, NATS_TLS_*_FILE, NATS_USER, NATS_PASSWORD_FILE, NATS_TOKEN_FILE,
NATS_NKEY_SEED_FILE, NATS_CREDS_FILE (see docs/configuration.md).
Exit codes: 0 ok, 1 failure, 2 bad input or usage, 3 not finished yet.`;

async function withRedis<T>(env: BosunEnv, fn: (redis: ReturnType<typeof createRedis>) => Promise<T>): Promise<T> {
  const redis = createRedis(env.redis, { name: 'bosun-cli' });
  redis.on('error', () => undefined);
  try {
    await waitForRedis(redis, env.redis, 5_000);
    return await fn(redis);
  } finally {
    redis.disconnect();
  }
}

/**
 * Publishes `approval.resolved` for a decision just made. Best effort: the decision stands
 * whatever happens here; when NATS is unreachable or the event is not stored, a warning says so.
 */
async function publishResolved(env: BosunEnv, redis: RedisClient, approval: Approval): Promise<void> {
  const warn = (why: string) =>
    process.stderr.write(
      `bosun: warning: the approval.resolved event for ${approval.id} could not be published (${why}); the decision is recorded\n`,
    );
  let nc;
  try {
    nc = await connectNats(env.nats, { name: 'bosun-cli' });
  } catch (err) {
    warn((err as Error).message);
    return;
  }
  try {
    // The runs stream stores the event for late observers; the services create it, but this may
    // be the first event under the prefix.
    await Promise.race([
      ensureRunsStream(nc, env.prefix, { replicas: env.streamReplicas }).catch(() => undefined),
      new Promise((r) => setTimeout(r, 5_000).unref()),
    ]);
    const log = createLogger({ service: 'bosun-cli', level: 'error', destination: process.stderr });
    const events = new EventPublisher({ prefix: env.prefix, redis, nats: nc, log });
    events.emit(approvalResolvedEvent(approval));
    await events.flush();
    if (events.stats.published === 0) warn('NATS did not store it in time');
  } finally {
    await nc.close().catch(() => undefined);
  }
}

/**
 * The decision of `bosun approve` / `bosun deny` from its flags, checked by the contract's
 * `parseDecision` (as the HTTP API and the approval store check it); a refusal is a usage error
 * (exit 2) worded for the command line.
 */
function decisionFromFlags(command: 'approve' | 'deny', values: { only?: string; reason?: string }, by: string): Decision {
  // Indexes as numbers; anything else is left as written, for the check to refuse.
  const only = values.only?.split(',').map((p) => (/^\d+$/.test(p.trim()) ? Number(p.trim()) : p));
  try {
    return parseDecision({
      decision: command,
      by,
      ...(only === undefined ? {} : { only }),
      ...(values.reason === undefined ? {} : { reason: values.reason }),
    });
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

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return command ? 0 : 2;
  }
  if (command === 'demo') {
    const { values } = parseCommand('demo', rest, { once: { type: 'boolean', default: false } }, 0);
    return runDemo({ once: values.once ?? false });
  }
  const env = readEnv();
  switch (command) {
    case 'publish': {
      const { positionals } = parseCommand('publish', rest, {}, 1);
      const file = positionals[0];
      if (!file) throw new UsageError('publish needs a file name, or - for standard input');
      const input = readIncident(file);
      return withRedis(env, async (redis) => {
        const queue = new Queue(INCIDENTS_QUEUE, { connection: redis, prefix: env.prefix });
        try {
          return reportPublished(await publishOrReplace({ redis, prefix: env.prefix }, queue, input));
        } finally {
          await queue.close();
        }
      });
    }
    case 'watch': {
      const { positionals, values } = parseCommand('watch', rest, { new: { type: 'boolean', default: false } }, 1);
      const runId = positionals[0];
      if (runId !== undefined && !RUN_ID_PATTERN.test(runId)) {
        throw new UsageError(`watch: "${runId}" is not a run id (r and 20 hex digits, as bosun publish prints it)`);
      }
      const nc = await connectNats(env.nats, { name: 'bosun-cli' });
      const ac = new AbortController();
      process.once('SIGINT', () => ac.abort());
      try {
        const events = followEvents(nc, {
          prefix: env.prefix,
          ...(runId ? { runId } : {}),
          from: values.new ? 'new' : 'start',
          signal: ac.signal,
        });
        if (!runId) {
          for await (const e of events) process.stdout.write(`${formatEvent(e)}\n`);
          return 0;
        }
        // One run: printed in `seq` order. An event that arrives ahead of an earlier one waits for
        // it, at most WATCH_GAP_MS; then the missing ones are named and skipped.
        const order = new SeqOrder();
        const print = (ready: RunEvent[]): boolean => {
          for (const e of ready) {
            process.stdout.write(`${formatEvent(e)}\n`);
            if (e.type === 'run.completed' || e.type === 'run.failed') return true;
          }
          return false;
        };
        const it = events[Symbol.asyncIterator]();
        let next = it.next();
        // A run that has not started yet (or is not under this prefix) has no events: say so once.
        const quiet = setTimeout(
          () =>
            process.stderr.write(`bosun watch: no events of run ${runId} under BOSUN_PREFIX=${env.prefix} yet; waiting (Ctrl-C to stop)\n`),
          5_000,
        );
        quiet.unref();
        for (;;) {
          const r = order.gapped
            ? await Promise.race([next, new Promise<'gap'>((res) => setTimeout(() => res('gap'), WATCH_GAP_MS).unref())])
            : await next;
          if (r === 'gap') {
            const { ready, missing } = order.skipGap();
            process.stderr.write(
              `bosun watch: events ${missing.join(', ')} of run ${runId} did not arrive within ${WATCH_GAP_MS} ms; skipped\n`,
            );
            if (print(ready)) break;
            continue;
          }
          if (r.done) break;
          clearTimeout(quiet);
          next = it.next();
          if (print(order.push(r.value))) break;
        }
        // A read may still be pending: stopping the consumer ends it, then the generator returns.
        ac.abort();
        await it.return?.(undefined);
      } finally {
        await nc.close();
      }
      return 0;
    }
    case 'result': {
      const { positionals, values } = parseCommand(
        'result',
        rest,
        { wait: { type: 'boolean', default: false }, timeout: { type: 'string', default: '600' } },
        1,
      );
      const id = positionals[0];
      if (!id) throw new UsageError('result needs an incident id');
      const timeoutS = secondsOption('result', 'timeout', values.timeout);
      return withRedis(env, async (redis) => {
        const queue = new Queue(INCIDENTS_QUEUE, { connection: redis, prefix: env.prefix });
        let events: QueueEvents | undefined;
        try {
          const job = await Job.fromId(queue, id);
          if (!job) {
            process.stderr.write(`no incident ${id} under BOSUN_PREFIX=${env.prefix}\n`);
            return 1;
          }
          const state = await job.getState();
          if (state === 'completed') {
            process.stdout.write(`${safeJson(job.returnvalue as RunResult)}\n`);
            return 0;
          }
          if (state === 'failed') {
            process.stderr.write(`${escapeControl(`incident ${id} failed: ${job.failedReason}`)}\n`);
            return 1;
          }
          if (!values.wait) {
            process.stderr.write(`incident ${id} is ${state} (run ${runIdFor(id, job.timestamp)}); use --wait to wait for it\n`);
            return 3;
          }
          const eventsConnection = redis.duplicate();
          events = new QueueEvents(INCIDENTS_QUEUE, { connection: eventsConnection, prefix: env.prefix });
          await events.waitUntilReady();
          try {
            const value = (await job.waitUntilFinished(events, timeoutS * 1000)) as RunResult;
            process.stdout.write(`${safeJson(value)}\n`);
            return 0;
          } catch (err) {
            process.stderr.write(`incident ${id}: ${(err as Error).message}\n`);
            return 1;
          } finally {
            await events.close();
            eventsConnection.disconnect();
          }
        } finally {
          await queue.close();
        }
      });
    }
    case 'dlq':
    case 'runs':
    case 'cancel':
    case 'ack':
    case 'stats':
    case 'approvals':
    case 'approve':
    case 'deny':
    case 'audit': {
      // Operator commands: parse everything first (bad usage exits 2 before any connection).
      const parse = <O extends Parameters<typeof parseCommand>[2]>(args: string[], options: O, positionals: number) =>
        parseCommand(command, args, options, positionals);
      // Text for the terminal: what comes from outside cannot drive it. JSON: escaped where JSON.stringify leaves raw.
      const print = (text: string) => process.stdout.write(`${escapeControl(text, { keepNewlines: true })}\n`);
      const printJson = (value: unknown) => process.stdout.write(`${safeJson(value)}\n`);
      let run: (deps: OperatorDeps) => Promise<number>;
      if (command === 'dlq') {
        const [first, ...more] = rest;
        const sub = first === undefined || first.startsWith('-') ? 'list' : first;
        const args = sub === first ? more : rest;
        if (sub === 'list') {
          const { values } = parse(args, { json: { type: 'boolean', default: false }, kind: { type: 'string' } }, 0);
          const kind = values.kind;
          if (kind !== undefined && !DeadLetterKind.options.includes(kind as DeadLetterKind)) {
            throw new UsageError(`dlq list: --kind must be one of ${DeadLetterKind.options.join(', ')}`);
          }
          run = async (deps) => {
            const entries = await listDeadLetters(deps, kind ? { kind } : {});
            if (values.json) printJson(entries.map((e) => e.entry));
            else print(formatDeadLetters(entries));
            return 0;
          };
        } else if (sub === 'show' || sub === 'retry' || sub === 'drop') {
          const { positionals } = parse(args, {}, 1);
          const id = positionals[0];
          if (!id) throw new UsageError(`dlq ${sub} needs a dead-letter job id (see bosun dlq list)`);
          run = async (deps) => {
            if (sub === 'show') {
              const entry = await showDeadLetter(deps, id);
              if (!entry) throw new OperatorError(`no dead-letter entry ${id} under BOSUN_PREFIX=${deps.prefix}`, 1);
              printJson(entry);
            } else if (sub === 'drop') {
              await dropDeadLetter(deps, id);
              process.stderr.write(`dropped dead-letter entry ${id}\n`);
            } else {
              const r = await retryDeadLetter(deps, id);
              if (r.previous)
                process.stderr.write(`note: entry ${id} was already retried as ${r.previous.incidentId} (run ${r.previous.runId})\n`);
              if (r.taskId)
                process.stderr.write(
                  `retrying ${r.taskId} inside the open run ${r.runId}; entry ${id} is linked to it (retriedAs) and stays in the queue\n`,
                );
              else
                process.stderr.write(
                  `re-running incident ${r.originalIncidentId} as ${r.incidentId}; entry ${id} is linked to it (retriedAs) and stays in the queue\n`,
                );
              process.stdout.write(`${r.runId}\n`);
            }
            return 0;
          };
        } else {
          throw new UsageError(`unknown dlq command "${sub}" (list, show, retry, drop)`);
        }
      } else if (command === 'cancel') {
        run = cancelCommand(rest, env);
      } else if (command === 'runs' && (rest[0] === undefined || rest[0] === 'list' || rest[0].startsWith('-'))) {
        run = runsListCommand(rest[0] === 'list' ? rest.slice(1) : rest);
      } else if (command === 'runs') {
        const [sub, ...args] = rest;
        if (sub !== 'show') throw new UsageError(`unknown runs command "${sub ?? ''}" (list, show)`);
        const { values, positionals } = parse(args, { json: { type: 'boolean', default: false } }, 1);
        const runId = positionals[0];
        if (!runId) throw new UsageError('runs show needs a run id');
        run = async (deps) => {
          const view = await showRun(deps, runId);
          if (values.json) printJson(view);
          else print(formatRun(view));
          for (const p of view.problems) process.stderr.write(`bosun: ${escapeControl(p)}\n`);
          return view.problems.length > 0 ? 1 : 0;
        };
      } else if (command === 'ack') {
        const { values, positionals } = parse(
          rest,
          {
            done: { type: 'boolean', default: false },
            retry: { type: 'boolean', default: false },
            skip: { type: 'boolean', default: false },
            by: { type: 'string' },
          },
          1,
        );
        const key = positionals[0];
        if (!key) throw new UsageError('ack needs a tool-call key (see bosun runs show, or bosun dlq list --kind in-doubt)');
        const actions = (['done', 'retry', 'skip'] as const).filter((a) => values[a]);
        const action = actions[0];
        if (actions.length !== 1 || !action) throw new UsageError('ack needs exactly one of --done, --retry, --skip');
        const by = values.by?.trim() || env.user || 'operator';
        run = async (deps) => {
          const r = await ackToolCall(deps, key, action, { by });
          const note = r.deadLetterId ? `dead letter ${r.deadLetterId} annotated` : 'no in-doubt dead letter found for it';
          if (action === 'retry') {
            process.stderr.write(`tool call ${key} re-sent once as job ${r.jobId ?? '?'} (by ${by}); ${note}\n`);
            process.stdout.write(`${JSON.stringify(r.result, null, 2)}\n`);
            return r.result.status === 'ok' ? 0 : 1;
          }
          process.stdout.write(
            `tool call ${key} resolved: ${action === 'done' ? 'took effect' : 'treated as not executed'} (by ${by} at ${r.resolution.at}); ${note}\n`,
          );
          return 0;
        };
      } else if (command === 'approvals') {
        const [first, ...more] = rest;
        const sub = first === undefined || first.startsWith('-') ? 'list' : first;
        const args = sub === first ? more : rest;
        if (sub === 'list') {
          const { values } = parse(args, { json: { type: 'boolean', default: false } }, 0);
          run = async (deps) => {
            const pending = await listApprovals(deps);
            if (values.json) printJson(pending);
            else print(formatApprovals(pending));
            return 0;
          };
        } else if (sub === 'show') {
          const { positionals } = parse(args, {}, 1);
          const id = positionals[0];
          if (!id) throw new UsageError('approvals show needs an approval id (see bosun approvals list)');
          run = async (deps) => {
            const a = await showApproval(deps, id);
            if (!a) throw new OperatorError(`no approval ${id} under BOSUN_PREFIX=${deps.prefix}`, 1);
            printJson(a);
            return 0;
          };
        } else {
          throw new UsageError(`unknown approvals command "${sub}" (list, show)`);
        }
      } else if (command === 'approve' || command === 'deny') {
        const { values, positionals } = parse(rest, { only: { type: 'string' }, reason: { type: 'string' }, by: { type: 'string' } }, 1);
        const id = positionals[0];
        if (!id) throw new UsageError(`${command} needs an approval id (see bosun approvals list)`);
        const by = values.by?.trim() || env.user || 'operator';
        const decision = decisionFromFlags(command, values, by);
        run = async (deps) => {
          const a = await decideApproval(deps, id, decision);
          const what = a.status === 'approved' ? `approved (calls ${(a.approved ?? []).join(', ')})` : `denied (${a.denyReason ?? ''})`;
          process.stdout.write(`approval ${a.id} ${what} by ${a.decidedBy ?? by} at ${a.decidedAt ?? '?'}\n`);
          await publishResolved(env, deps.redis, a);
          return 0;
        };
      } else if (command === 'audit') {
        const { values } = parse(
          rest,
          { run: { type: 'string' }, limit: { type: 'string', default: '50' }, json: { type: 'boolean', default: false } },
          0,
        );
        const limit = Number(values.limit);
        if (!/^\d+$/.test(values.limit) || !Number.isSafeInteger(limit) || limit < 1)
          throw new UsageError(`audit: --limit must be a positive integer (got "${values.limit}")`);
        if (values.run !== undefined && values.run.trim() === '') throw new UsageError('audit: --run needs a run id');
        run = async (deps) => {
          const entries = await readAudit(deps, { limit, ...(values.run ? { runId: values.run } : {}) });
          if (values.json) printJson(entries);
          else print(formatAudit(entries));
          return 0;
        };
      } else {
        const { values } = parse(rest, { json: { type: 'boolean', default: false } }, 0);
        run = async (deps) => {
          const stats = await readStats(deps);
          if (values.json) printJson(stats);
          else print(formatStats(stats));
          return 0;
        };
      }
      try {
        return await withRedis(env, (redis) => run({ redis, prefix: env.prefix }));
      } catch (err) {
        if (!(err instanceof OperatorError)) throw err;
        process.stderr.write(`bosun: ${escapeControl(err.message)}\n`);
        return err.exitCode;
      }
    }
    default:
      throw new UsageError(`unknown command "${command}"`);
  }
}

watchOutputErrors();

main(process.argv.slice(2)).then(
  (code) => exitAfterFlush(code),
  (err: unknown) => {
    if (err instanceof UsageError) {
      process.stderr.write(`bosun: ${escapeControl(err.message)}\n${err.showUsage ? `\n${USAGE}\n` : ''}`);
      return exitAfterFlush(2);
    }
    if (err instanceof InvalidInputError || err instanceof ConfigError) {
      process.stderr.write(`bosun: ${escapeControl(err.message)}\n`);
      return exitAfterFlush(2);
    }
    process.stderr.write(`bosun: ${escapeControl(err instanceof Error ? err.message : String(err))}\n`);
    return exitAfterFlush(1);
  },
);
