import { Job, Queue, UnrecoverableError, WaitingChildrenError } from 'bullmq';
import { z } from 'zod';
import {
  INCIDENTS_QUEUE,
  INCIDENT_JOB,
  Incident,
  RunCancellation,
  STALL_MARKER,
  TASK_JOB,
  TaskResult,
  describeIssues,
  isStalled,
  runIdFor,
  specialistQueue,
  stallText,
  taskIdFor,
  type InDoubtCall,
  type RunResult,
  type SpecialistOutcome,
  type TaskJob,
} from '@bosun/contract';
import { buildStallPayload, specialistConfig, type ClusterConfig, type Logger } from '@bosun/config';
import {
  DELEGATE_TOOL_PREFIX,
  ModelError,
  delegateToolName,
  renderIncident,
  type Model,
  type ModelResponse,
  type ToolDeclaration,
} from '@bosun/models';
import { MessageSchema, BadCheckpointError, TaskCheckpoint, taskDeadline } from '@bosun/agent';
import {
  ApprovalError,
  COORDINATOR_TIMERS_QUEUE,
  approvalResolvedEvent,
  keys,
  readRunCancellation,
  type ApprovalStore,
  type CheckpointStore,
  type DeadLetters,
  type EventSink,
} from '@bosun/transport';
import type { RedisClient } from '@bosun/transport';

const Delegation = z.object({
  taskId: z.string(),
  agent: z.string(),
  round: z.number().int().nonnegative(),
  /** The model's call id, in delegate mode. */
  callId: z.string().optional(),
  task: z.string(),
  /** The delegation this one retries (an operator's `bosun dlq retry`); it supersedes that one. */
  retryOf: z.string().optional(),
  /** When this delegation times out (ISO). */
  deadlineAt: z.string().optional(),
  /** Filled once the child job has finished (or could not be created). */
  result: TaskResult.optional(),
});
type Delegation = z.infer<typeof Delegation>;

const RunCheckpointSchema = z.object({
  v: z.literal(1),
  runId: z.string(),
  incidentId: z.string(),
  startedAt: z.string(),
  /** When the run ends `partial` with what it has (ISO). */
  deadlineAt: z.string(),
  /** The incident job's id, so timers can find the parked job. */
  jobId: z.string(),
  mode: z.enum(['route', 'delegate']),
  phase: z.enum(['routing', 'waiting', 'thinking', 'done']),
  round: z.number().int().nonnegative(),
  delegations: z.array(Delegation),
  messages: z.array(MessageSchema),
  routed: z.array(z.string()).optional(),
  /** An operator's cancellation, once the coordinator has seen it. */
  cancelled: RunCancellation.optional(),
  result: z.unknown().optional(),
});
type RunCheckpoint = z.infer<typeof RunCheckpointSchema>;

/** Internal queue of the coordinator's deadline timers (delayed jobs), in-run retries and cancellations. */
export const TIMERS_QUEUE = COORDINATOR_TIMERS_QUEUE;

const TimerJob = z.object({
  /**
   * `retry-task`: an operator's `bosun dlq retry` of one delegation of a run still open;
   * `cancel-run`: an operator's `bosun cancel` (the cancellation itself is in the run's cancel key).
   */
  kind: z.enum(['task-deadline', 'run-deadline', 'retry-task', 'cancel-run']),
  runId: z.string(),
  taskId: z.string().optional(),
  /** A task deadline moved by an approval wait: the how-manieth time (its job id ends `-m<n>`). */
  moved: z.number().int().positive().optional(),
  /** A cancellation looked at again, the run not being parked before: the how-manieth time (`-a<n>`). */
  again: z.number().int().positive().optional(),
});

/** How often, a second apart, a cancellation is looked at again while its run is not parked. */
const CANCEL_LOOKS = 30;

/** A parent job's children: return values and the failures it ignores, keyed by child job key. */
type ChildrenRead = [Record<string, unknown>, Record<string, string>];

function readChildren(job: Job): Promise<ChildrenRead> {
  return Promise.all([job.getChildrenValues(), job.getIgnoredChildrenFailures()]) as Promise<ChildrenRead>;
}

/**
 * The children's results by task id. `early` is a read made before the run was found done (beside
 * its checkpoint): it may miss a child that ended just then, so when a delegation still without a
 * result is in neither list, the children are read again.
 */
export async function childResults(
  delegations: readonly { taskId: string; result?: unknown }[],
  early: Promise<ChildrenRead> | undefined,
  read: () => Promise<ChildrenRead>,
): Promise<{ byId: Map<string, unknown>; failedById: Map<string, string> }> {
  const index = ([values, failures]: ChildrenRead) => ({
    byId: new Map(Object.entries(values).map(([key, value]) => [key.slice(key.lastIndexOf(':') + 1), value] as const)),
    failedById: new Map(Object.entries(failures).map(([key, reason]) => [key.slice(key.lastIndexOf(':') + 1), reason] as const)),
  });
  const first = index(await (early ?? read()));
  const incomplete = delegations.some((d) => !d.result && !first.byId.has(d.taskId) && !first.failedById.has(d.taskId));
  return early && incomplete ? index(await read()) : first;
}

/** Time a specialist has past its own deadline to report the timeout itself before the coordinator does. */
const DEADLINE_GRACE_MS = 5_000;

/** BullMQ's reason for a job lost more often than `maxStalledCount` (it offers no code to test instead). */
const LOST_TOO_OFTEN = /stalled more than allowable limit/;

/** The ports a coordinator uses. */
export interface CoordinatorDeps {
  redis: RedisClient;
  prefix: string;
  config: ClusterConfig;
  model: Model;
  events: EventSink;
  checkpoints: CheckpointStore;
  deadLetters: Pick<DeadLetters, 'add'>;
  log: Logger;
  /** Where approvals live: a cancelled run denies the approvals its tasks wait for. Optional. */
  approvals?: Pick<ApprovalStore, 'get' | 'decide'>;
}

const DEFAULT_ROUTE_INSTRUCTION =
  'You triage production incidents for an unattended incident-response team. Pick the specialists ' +
  'whose domain covers the incident. Reply with JSON only: {"specialists": ["name", ...]}.';

const DEFAULT_DELEGATE_INSTRUCTION =
  'You coordinate an unattended incident-response team. Nobody will answer questions. Delegate ' +
  'parts of the investigation to specialists with the delegate_* tools (several at once when they ' +
  'are independent), read their reports, and when you have enough, answer with a short incident ' +
  'summary: what was found, what was not checked, and the recommended next step. A report that ' +
  'starts with "INCOMPLETE" means that part was not checked.';

/**
 * Triages incidents and delegates to specialists. Waiting for specialists holds no worker: the
 * run is checkpointed and the incident job parked in BullMQ's waiting-children state, then
 * resumed from the checkpoint — in any coordinator process — when the children finish.
 */
export class Coordinator {
  private readonly deps: CoordinatorDeps;
  private readonly queues = new Map<string, Queue>();
  private readonly timers: Queue;
  private readonly incidents: Queue;

  constructor(deps: CoordinatorDeps) {
    this.deps = deps;
    this.timers = new Queue(TIMERS_QUEUE, { connection: deps.redis, prefix: deps.prefix });
    this.incidents = new Queue(INCIDENTS_QUEUE, { connection: deps.redis, prefix: deps.prefix });
  }

  private queueFor(agent: string): Queue {
    let q = this.queues.get(agent);
    if (!q) {
      q = new Queue(specialistQueue(agent), { connection: this.deps.redis, prefix: this.deps.prefix });
      this.queues.set(agent, q);
    }
    return q;
  }

  /** The BullMQ processor of the `incidents` queue. */
  async process(job: Job, token: string | undefined): Promise<RunResult> {
    const { log, deadLetters } = this.deps;
    if (job.name !== INCIDENT_JOB) {
      // The same derived id as a rejected envelope: `bosun publish` finds it to replace the job.
      await deadLetters.add(
        {
          kind: 'poison',
          reason: `unexpected job name "${job.name}" on the incidents queue (expected "${INCIDENT_JOB}")`,
          input: job.data,
          ...(typeof job.id === 'string' ? { incidentId: job.id } : {}),
        },
        `poison-${job.id ?? 'unknown'}-${job.timestamp}`,
      );
      throw new UnrecoverableError(`unexpected job name "${job.name}"`);
    }
    const parsed = Incident.safeParse(job.data);
    if (!parsed.success) {
      const reason = `invalid incident: ${describeIssues(parsed.error).issues.join('; ')}`;
      log.warn({ jobId: job.id, reason }, 'incident rejected');
      await deadLetters.add(
        { kind: 'poison', reason, input: job.data, ...(typeof job.id === 'string' ? { incidentId: job.id } : {}) },
        `poison-${job.id ?? 'unknown'}-${job.timestamp}`,
      );
      throw new UnrecoverableError(reason);
    }
    const incident = parsed.data;
    if (job.id !== incident.id) {
      // The run id, `bosun result` and duplicate detection all go by the job id: an incident
      // under another job id would run under a name nobody looks for, or collide with its twin.
      const reason = `job id "${job.id ?? ''}" does not match the incident's id "${incident.id}": publish an incident with its id as the job id`;
      log.warn({ jobId: job.id, incidentId: incident.id }, 'incident rejected: job id and incident id differ');
      await deadLetters.add(
        { kind: 'poison', reason, input: job.data, ...(typeof job.id === 'string' ? { incidentId: job.id } : {}) },
        `poison-${job.id ?? 'unknown'}-${job.timestamp}`,
      );
      throw new UnrecoverableError(reason);
    }
    const runId = runIdFor(incident.id, job.timestamp);
    const ckptId = `run:${runId}`;
    let state: RunCheckpoint;
    let fresh = false;
    // A job picked up again is usually a run back from waiting-children: its children's results
    // are read beside its checkpoint (and read again if they turn out to predate a child's end).
    let children: Promise<ChildrenRead> | undefined;
    try {
      // Picked up for the first time (BullMQ counts every start): there is no checkpoint to read.
      const loaded = job.attemptsStarted <= 1 ? { state: this.freshState(incident.id, runId, String(job.id)), fresh: true } : undefined;
      if (!loaded && token) {
        children = readChildren(job);
        children.catch(() => undefined);
      }
      const got = loaded ?? (await this.load(ckptId, incident.id, runId, String(job.id)));
      state = got.state;
      fresh = got.fresh;
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      await deadLetters.add({ kind: 'failure', runId, incidentId: incident.id, reason, input: job.data }, `failure-${runId}-checkpoint`);
      this.deps.events.emit({ type: 'run.failed', runId, incidentId: incident.id, data: { reason } });
      throw new UnrecoverableError(reason);
    }
    if (state.result) return state.result as RunResult;
    // The run's deadline timer and its progress, under way while it routes; awaited before the
    // first checkpoint is written.
    let startup: Promise<unknown> | undefined;
    const started = async (): Promise<void> => {
      const s = startup;
      startup = undefined;
      await s;
    };
    if (fresh) {
      // No checkpoint yet: the first one is written before the first effect (a child job). A
      // run that dies before it starts afresh; the timer's job id keeps its first deadline.
      startup = Promise.all([
        this.timers.add(
          'run-deadline',
          { kind: 'run-deadline', runId },
          {
            jobId: `run-deadline-${runId}`,
            delay: this.deps.config.coordinator.runDeadlineMs,
            removeOnComplete: true,
            removeOnFail: { age: 7 * 24 * 3600 },
          },
        ),
        job.updateProgress({ runId, phase: 'started' }),
      ]);
      startup.catch(() => undefined);
      this.deps.events.emit({
        type: 'run.started',
        runId,
        incidentId: incident.id,
        data: {
          incident: {
            id: incident.id,
            reason: incident.reason,
            severity: incident.severity,
            source: incident.source,
            summary: incident.summary,
          },
          mode: state.mode,
        },
      });
    }

    try {
      for (;;) {
        if (state.phase !== 'done' && (await this.cancelRequested(state))) {
          await started();
          const result = await this.endCancelled(job, incident, state, children);
          children = undefined;
          return result;
        }
        if (state.phase !== 'done' && Date.now() >= Date.parse(state.deadlineAt)) {
          // The run's deadline: end now with what we have; whatever is still out is INCOMPLETE.
          if (state.phase === 'waiting') await this.collect(job, state, 'skip');
          for (const d of state.delegations) if (!d.result) await this.incompletePart(state, d, 'timeout', 'the run reached its deadline');
          state.phase = 'done';
          await this.deps.checkpoints.save(ckptId, state);
          const answer = `${this.merge(incident, state)}\n\nThe run reached its deadline (${state.deadlineAt}) before it was complete.`;
          return await this.finish(ckptId, incident, state, answer, { deadlineReached: true });
        }
        if (state.phase === 'waiting') {
          // Park until every child has finished; BullMQ requeues this job then.
          const stillWaiting = token ? await job.moveToWaitingChildren(token) : false;
          if (stillWaiting) throw new WaitingChildrenError();
          await this.collect(job, state, 'fail', children);
          children = undefined;
          state.phase = state.mode === 'route' ? 'done' : 'thinking';
          if (state.mode === 'delegate') this.appendDelegationResults(state);
          // Route mode answers next, and that saves; nothing happens in between.
          if (state.mode === 'delegate') await this.deps.checkpoints.save(ckptId, state);
        }
        if (state.phase === 'routing') {
          if (!state.routed) {
            await this.route(incident, state);
            await started();
            await this.deps.checkpoints.save(ckptId, state);
          }
          // A cancellation that came during routing ends the run at the top of the loop, before any child job.
          if (await this.cancelRequested(state)) continue;
          await this.dispatch(job, incident, state);
          state.phase = state.delegations.some((d) => !d.result) ? 'waiting' : 'done';
          await this.deps.checkpoints.save(ckptId, state);
          continue;
        }
        if (state.phase === 'thinking') {
          const answer = await this.think(incident, state);
          await started();
          await this.deps.checkpoints.save(ckptId, state);
          if (answer !== undefined) return await this.finish(ckptId, incident, state, answer);
          if (await this.cancelRequested(state)) continue;
          await this.dispatch(job, incident, state);
          state.phase = state.delegations.some((d) => !d.result) ? 'waiting' : 'thinking';
          if (state.phase === 'thinking') this.appendDelegationResults(state);
          await this.deps.checkpoints.save(ckptId, state);
          continue;
        }
        if (state.phase === 'done') return await this.finish(ckptId, incident, state, this.merge(incident, state));
      }
    } catch (err) {
      if (err instanceof WaitingChildrenError) throw err;
      await started().catch((e: unknown) => log.warn({ err: e, runId }, 'could not start the run deadline timer or progress'));
      // A passing provider error is retried by BullMQ while the job has attempts left; after
      // the last, the run ends with an honest failure like any other.
      if (err instanceof ModelError && err.retryable && job.attemptsMade + 1 < (job.opts.attempts ?? 1)) throw err;
      const reason = err instanceof Error ? err.message : String(err);
      log.error({ err, runId }, 'run failed');
      const inDoubt = this.inDoubt(state);
      const result: RunResult = {
        v: 1,
        runId,
        incidentId: incident.id,
        status: 'failed',
        answer: withInDoubt(`The run failed before it could answer: ${reason}`, inDoubt),
        specialists: this.outcomes(state),
        stalled: 0,
        ...(inDoubt ? { inDoubt } : {}),
        startedAt: state.startedAt,
        finishedAt: new Date().toISOString(),
      };
      result.stalled = result.specialists.filter((s) => s.status !== 'completed').length;
      state.result = result;
      state.phase = 'done';
      await this.deps.checkpoints.save(ckptId, state);
      await deadLetters.add({ kind: 'failure', runId, incidentId: incident.id, reason, input: job.data }, `failure-${runId}`);
      this.deps.events.emit({ type: 'run.failed', runId, incidentId: incident.id, data: { reason, ...(inDoubt ? { inDoubt } : {}) } });
      return result;
    }
  }

  private freshState(incidentId: string, runId: string, jobId: string): RunCheckpoint {
    return {
      v: 1,
      runId,
      incidentId,
      startedAt: new Date().toISOString(),
      deadlineAt: new Date(Date.now() + this.deps.config.coordinator.runDeadlineMs).toISOString(),
      jobId,
      mode: this.deps.config.coordinator.mode,
      phase: this.deps.config.coordinator.mode === 'route' ? 'routing' : 'thinking',
      round: 0,
      delegations: [],
      messages: [],
    };
  }

  private async load(ckptId: string, incidentId: string, runId: string, jobId: string): Promise<{ state: RunCheckpoint; fresh: boolean }> {
    const raw = await this.deps.checkpoints.load(ckptId);
    if (raw === null) return { state: this.freshState(incidentId, runId, jobId), fresh: true };
    const r = RunCheckpointSchema.safeParse(raw);
    if (!r.success) throw new BadCheckpointError(ckptId, describeIssues(r.error).issues.join('; '));
    return { state: r.data, fresh: false };
  }

  /** Route mode: one classifier call names the specialists. */
  private async route(incident: Incident, state: RunCheckpoint): Promise<void> {
    const { config, model, events } = this.deps;
    const known = Object.keys(config.specialists);
    const system = [
      config.coordinator.instruction ?? DEFAULT_ROUTE_INSTRUCTION,
      '',
      'Specialists:',
      ...known.map((n) => `- ${n}: ${config.specialists[n]?.description ?? ''}`),
      '',
      'Usual routes (incident reason -> specialists):',
      ...Object.entries(config.coordinator.routes).map(([r, t]) => `- ${r} -> ${t.join(', ')}`),
    ].join('\n');
    const started = Date.now();
    const response = await model.generate({
      agent: 'coordinator',
      mode: 'single',
      system,
      messages: [{ role: 'user', text: renderIncident(incident) }],
      tools: [],
    });
    this.modelCalled(incident, state, response, Date.now() - started);
    let names = parseRouting(response.text ?? '', known);
    if (names.length === 0) names = [...config.coordinator.defaultRoute];
    const unique = [...new Set(names)];
    state.routed = unique;
    const unknown = unique.filter((n) => !specialistConfig(config, n));
    events.emit({ type: 'run.routed', runId: state.runId, incidentId: incident.id, data: { specialists: unique, unknown } });
    for (const agent of unique) {
      state.delegations.push({
        taskId: taskIdFor(state.runId, state.delegations.length, agent),
        agent,
        round: 0,
        task: `Investigate this incident within your domain (${agent}) and report what you find.`,
      });
    }
  }

  /** Delegate mode: one chat turn. Returns the answer when the model gives one. */
  private async think(incident: Incident, state: RunCheckpoint): Promise<string | undefined> {
    const { config, model } = this.deps;
    if (state.messages.length === 0) {
      state.messages.push({ role: 'user', text: `A new incident needs an answer.\n\n${renderIncident(incident)}` });
    }
    const last = state.messages[state.messages.length - 1];
    if (last?.role === 'model') {
      // A model turn already saved (we crashed after saving it): act on it, don't ask again.
      if (!last.calls || last.calls.length === 0) return last.text ?? '';
    } else {
      const finalRound = state.round >= config.coordinator.maxRounds;
      const tools: ToolDeclaration[] = finalRound
        ? []
        : Object.entries(config.specialists).map(([name, s]) => ({
            name: delegateToolName(name),
            description: `Delegate part of the investigation to the ${name} specialist: ${s.description}`,
            parameters: {
              type: 'object',
              properties: { task: { type: 'string', description: 'What this specialist should find out.' } },
              required: ['task'],
            },
          }));
      if (finalRound)
        state.messages.push({ role: 'user', text: 'No more delegation rounds are available. Answer now with what you have.' });
      const started = Date.now();
      const response = await model.generate({
        agent: 'coordinator',
        mode: 'chat',
        system: config.coordinator.instruction ?? DEFAULT_DELEGATE_INSTRUCTION,
        messages: state.messages,
        tools,
      });
      this.modelCalled(incident, state, response, Date.now() - started);
      state.messages.push({
        role: 'model',
        ...(response.text ? { text: response.text } : {}),
        ...(response.calls.length ? { calls: response.calls } : {}),
      });
      if (response.calls.length === 0) return response.text ?? '';
      // The round advances in the same checkpoint write as the turn that opens it.
      state.round++;
    }
    const turn = state.messages[state.messages.length - 1];
    const calls = turn?.role === 'model' ? (turn.calls ?? []) : [];
    const byTool = new Map(Object.keys(config.specialists).map((n) => [delegateToolName(n), n]));
    for (const call of calls) {
      if (state.delegations.some((d) => d.callId === call.id)) continue;
      const agent = byTool.get(call.name) ?? call.name.replace(DELEGATE_TOOL_PREFIX, '');
      const task =
        typeof call.args.task === 'string' && call.args.task.trim() !== ''
          ? call.args.task
          : 'Investigate this incident within your domain and report what you find.';
      state.delegations.push({
        taskId: taskIdFor(state.runId, state.delegations.length, agent),
        agent,
        round: state.round,
        callId: call.id,
        task,
      });
    }
    if (!state.routed) state.routed = [];
    for (const d of state.delegations) if (d.round === state.round && !state.routed.includes(d.agent)) state.routed.push(d.agent);
    this.deps.events.emit({
      type: 'run.routed',
      runId: state.runId,
      incidentId: incident.id,
      data: { specialists: state.delegations.filter((d) => d.round === state.round).map((d) => d.agent), round: state.round },
    });
    return undefined;
  }

  /** Adds a child job for every delegation of the current round that has none yet. Idempotent. */
  private async dispatch(job: Job, incident: Incident, state: RunCheckpoint): Promise<void> {
    const { config, events } = this.deps;
    for (const d of state.delegations) {
      if (d.result || d.round !== state.round) continue;
      const spec = specialistConfig(config, d.agent);
      if (!spec) {
        const reason = `unknown specialist "${d.agent}" (known: ${Object.keys(config.specialists).join(', ')})`;
        d.result = {
          v: 1,
          taskId: d.taskId,
          agent: d.agent,
          status: 'failed',
          output: stallText(d.agent, '', reason),
          attempts: 0,
          error: reason,
        };
        await this.deps.deadLetters.add(
          { kind: 'failure', runId: state.runId, incidentId: incident.id, agent: d.agent, taskId: d.taskId, reason, attempts: 0 },
          `failure-${d.taskId}`,
        );
        events.emit({
          type: 'agent.failed',
          runId: state.runId,
          incidentId: incident.id,
          agent: d.agent,
          data: { taskId: d.taskId, reason },
        });
        continue;
      }
      d.deadlineAt ??= new Date(Date.now() + spec.deadlineMs).toISOString();
      const data: TaskJob = {
        v: 1,
        runId: state.runId,
        incidentId: incident.id,
        taskId: d.taskId,
        agent: d.agent,
        task: d.task,
        incident,
        deadlineAt: d.deadlineAt,
      };
      // The backstop (if no specialist reports the timeout itself, the coordinator does) and the
      // child job, side by side: both are idempotent by job id, and the run parks only after both.
      await Promise.all([
        this.timers.add(
          'task-deadline',
          { kind: 'task-deadline', runId: state.runId, taskId: d.taskId },
          {
            jobId: `task-deadline-${d.taskId}`,
            delay: Math.max(0, Date.parse(d.deadlineAt) - Date.now()) + DEADLINE_GRACE_MS,
            removeOnComplete: true,
            removeOnFail: { age: 7 * 24 * 3600 },
          },
        ),
        this.queueFor(d.agent).add(TASK_JOB, data, {
          jobId: d.taskId,
          parent: { id: job.id as string, queue: job.queueQualifiedName },
          attempts: spec.retries + 1,
          backoff: { type: 'exponential', delay: 1_000 },
          // A child that fails for good must not block the run: its failure is collected instead.
          ignoreDependencyOnFailure: true,
          removeOnComplete: { age: 7 * 24 * 3600 },
          removeOnFail: { age: 7 * 24 * 3600 },
        }),
      ]);
      events.emit({
        type: 'agent.delegated',
        runId: state.runId,
        incidentId: incident.id,
        agent: d.agent,
        data: { taskId: d.taskId, task: d.task, round: d.round, ...(d.retryOf ? { retryOf: d.retryOf } : {}) },
      });
    }
  }

  /** Reads the children's results (and failures) into the delegations. */
  private async collect(job: Job, state: RunCheckpoint, missing: 'fail' | 'skip' = 'fail', read?: Promise<ChildrenRead>): Promise<void> {
    const { byId, failedById } = await childResults(state.delegations, read, () => readChildren(job));
    for (const d of state.delegations) {
      if (d.result) continue;
      const value = byId.get(d.taskId);
      const parsed = TaskResult.safeParse(value);
      if (parsed.success) {
        d.result = parsed.data;
        continue;
      }
      const failed = failedById.get(d.taskId);
      if (missing === 'skip' && failed === undefined && value === undefined) continue;
      const reason =
        failed ??
        (value === undefined
          ? 'no result from the specialist task'
          : `malformed result: ${describeIssues(parsed.error).issues.join('; ')}`);
      await this.incompletePart(state, d, failed !== undefined && LOST_TOO_OFTEN.test(failed) ? 'stall' : 'failure', reason);
    }
  }

  /**
   * What a task's checkpoint says about a task that will not report: the agent's last words
   * (empty when there are none) and its calls in doubt.
   */
  private async leftBehind(taskId: string): Promise<{ lastWords: string; inDoubt: InDoubtCall[] }> {
    try {
      const ckpt = TaskCheckpoint.parse(await this.deps.checkpoints.load(`task:${taskId}`), `task:${taskId}`);
      const inDoubt = ckpt?.inDoubt ?? [];
      for (const m of [...(ckpt?.messages ?? [])].reverse()) if (m.role === 'model' && m.text) return { lastWords: m.text, inDoubt };
      return { lastWords: '', inDoubt };
    } catch {
      // An unreadable checkpoint has nothing to offer.
      return { lastWords: '', inDoubt: [] };
    }
  }

  private async attemptsOf(d: Delegation): Promise<number> {
    const child = await Job.fromId(this.queueFor(d.agent), d.taskId).catch(() => undefined);
    return child?.attemptsMade ?? 0;
  }

  /**
   * A delegation without a result becomes an INCOMPLETE part, never a hole: `stall` (lost more
   * often than the stalled-job limit), `failure` (failed after its retries), `timeout` (past its
   * deadline or the run's) or `cancelled` (an operator cancelled the run). After a timeout or a
   * cancellation the specialist, which may still be at work, is told to stop before its next
   * effect. The dead letter is written before the event that announces it; a cancelled part has
   * none (the operator who cancelled it has nothing left to act on; the run result names it).
   */
  private async incompletePart(
    state: RunCheckpoint,
    d: Delegation,
    kind: 'stall' | 'failure' | 'timeout' | 'cancelled',
    reason: string,
  ): Promise<void> {
    const spec = specialistConfig(this.deps.config, d.agent);
    const [{ lastWords, inDoubt }, attempts] = await Promise.all([this.leftBehind(d.taskId), this.attemptsOf(d)]);
    const output = spec ? buildStallPayload(spec, d.agent, lastWords, reason) : stallText(d.agent, lastWords, reason);
    d.result = {
      v: 1,
      taskId: d.taskId,
      agent: d.agent,
      status: kind === 'failure' ? 'failed' : 'stalled',
      output,
      attempts,
      error: reason,
      lastWords,
      ...(inDoubt.length > 0 ? { inDoubt } : {}),
    };
    if (kind === 'timeout' || kind === 'cancelled')
      await this.deps.redis.set(keys.cancel(this.deps.prefix, d.taskId), '1', 'EX', 7 * 24 * 3600);
    const dlqReason = kind === 'timeout' ? `${d.agent} ${reason}` : reason;
    if (kind !== 'cancelled') {
      await this.deps.deadLetters.add(
        {
          kind,
          runId: state.runId,
          incidentId: state.incidentId,
          agent: d.agent,
          taskId: d.taskId,
          reason: dlqReason,
          lastWords,
          attempts,
        },
        `${kind}-${d.taskId}`,
      );
    }
    this.deps.events.emit({
      type: kind === 'failure' ? 'agent.failed' : 'agent.stalled',
      runId: state.runId,
      incidentId: state.incidentId,
      agent: d.agent,
      data: { taskId: d.taskId, kind, reason, marker: STALL_MARKER },
    });
  }

  /**
   * The processor of the timers queue. A task deadline (or the run's) that passes while the run
   * is parked turns the missing delegations into INCOMPLETE `timeout` results and releases the
   * parked run, so it never waits forever on a specialist that will not answer.
   */
  async onTimer(job: Job): Promise<void> {
    const timer = TimerJob.parse(job.data);
    const ckptId = `run:${timer.runId}`;
    const raw = await this.deps.checkpoints.load(ckptId);
    const parsed = RunCheckpointSchema.safeParse(raw);
    if (!parsed.success) return timer.kind === 'cancel-run' ? this.lookAgain(timer) : undefined;
    const state = parsed.data;
    if (state.result) return;
    const parent = state.phase === 'waiting' ? await Job.fromId(this.incidents, state.jobId) : undefined;
    // Only a parked run may be changed from here; an active one is being handled by its processor.
    if (!parent || (await parent.getState()) !== 'waiting-children') return timer.kind === 'cancel-run' ? this.lookAgain(timer) : undefined;
    if (timer.kind === 'retry-task') return this.retryDelegation(parent, ckptId, state, timer.taskId ?? '');
    if (timer.kind === 'cancel-run') return this.cancelParked(ckptId, state);
    const due = state.delegations.filter((d) => !d.result && (timer.kind === 'run-deadline' || d.taskId === timer.taskId));
    const release: Job[] = [];
    let changed = false;
    for (const d of due) {
      const child = await Job.fromId(this.queueFor(d.agent), d.taskId);
      if (child && (await child.getState()) === 'completed') continue;
      if (timer.kind === 'task-deadline' && (await this.rearmIfPaused(timer.moved ?? 0, timer.runId, d))) continue;
      changed = true;
      await this.incompletePart(
        state,
        d,
        'timeout',
        timer.kind === 'run-deadline' ? 'the run reached its deadline' : `did not report before its deadline (${d.deadlineAt ?? '?'})`,
      );
      if (child) release.push(child);
    }
    if (!changed) return;
    await this.deps.checkpoints.save(ckptId, state);
    // Dropping the dependency lets BullMQ move the parked run back to the queue once none remain.
    for (const child of release) await child.removeChildDependency();
  }

  /**
   * Whether an operator has cancelled the run (`bosun cancel`, `POST /runs/<runId>/cancel`): read
   * from the run's cancel key until seen, then kept in the run's state.
   */
  private async cancelRequested(state: RunCheckpoint): Promise<boolean> {
    state.cancelled ??= (await readRunCancellation(this.deps.redis, this.deps.prefix, state.runId)) ?? undefined;
    return state.cancelled !== undefined;
  }

  /**
   * Ends a cancelled run that this process holds: the delegations still out become INCOMPLETE
   * `cancelled` parts (their specialists stop before their next effect, their children no longer
   * hold the run), and the answer says who cancelled it, why, and what was not finished.
   */
  private async endCancelled(job: Job, incident: Incident, state: RunCheckpoint, children?: Promise<ChildrenRead>): Promise<RunResult> {
    const cancelled = state.cancelled!;
    if (state.phase === 'waiting') await this.collect(job, state, 'skip', children);
    const cut: Delegation[] = [];
    for (const d of state.delegations) {
      if (d.result) continue;
      await this.incompletePart(state, d, 'cancelled', cancelledReason(cancelled));
      cut.push(d);
      // A child still out would keep the incident job from completing.
      const child = await Job.fromId(this.queueFor(d.agent), d.taskId);
      if (child) await child.removeChildDependency();
    }
    for (const d of cut) await this.denyWaitingApproval(d, cancelled);
    state.phase = 'done';
    const line = `This run was CANCELLED by ${cancelled.by} at ${cancelled.at}: ${cancelled.reason}`;
    const open = this.current(state)
      .filter((d) => d.result?.status !== 'completed')
      .map((d) => d.agent);
    const answer =
      state.delegations.length === 0
        ? `Incident ${incident.id} (${incident.reason}, ${incident.severity}): ${incident.summary}\n\n${line}\nIt was cancelled before anything was delegated: nothing was checked.`
        : [
            this.merge(incident, state),
            '',
            line,
            open.length > 0 ? `Not finished: ${open.join(', ')}.` : 'Every delegated part had reported before the cancellation.',
          ].join('\n');
    return this.finish(`run:${state.runId}`, incident, state, answer);
  }

  /**
   * The timer of a cancellation, for a parked run: the delegations still out become INCOMPLETE
   * `cancelled` parts and their children are released, so the run wakes and ends at once (in
   * {@link endCancelled}). A child that has already completed keeps its result.
   */
  private async cancelParked(ckptId: string, state: RunCheckpoint): Promise<void> {
    if (!(await this.cancelRequested(state))) return;
    const cut: Delegation[] = [];
    const release: Job[] = [];
    for (const d of state.delegations) {
      if (d.result) continue;
      const child = await Job.fromId(this.queueFor(d.agent), d.taskId);
      if (child && (await child.getState()) === 'completed') continue;
      await this.incompletePart(state, d, 'cancelled', cancelledReason(state.cancelled!));
      cut.push(d);
      if (child) release.push(child);
    }
    // Saved (with the cancellation) before the run is released: it resumes from this checkpoint.
    await this.deps.checkpoints.save(ckptId, state);
    for (const child of release) await child.removeChildDependency();
    // Last: a denial wakes a parked task, which may then end at once, and must find the run
    // already released (else its end would wake the run before this checkpoint is saved).
    for (const d of cut) await this.denyWaitingApproval(d, state.cancelled);
  }

  /**
   * A cancellation of a run that is not parked: the run sees it at its next step (one not started
   * yet, as soon as it starts). In case it parks first — having checked just before the
   * cancellation came — the timer looks again a second later, {@link CANCEL_LOOKS} times at most.
   */
  private async lookAgain(timer: z.infer<typeof TimerJob>): Promise<void> {
    const again = (timer.again ?? 0) + 1;
    if (again > CANCEL_LOOKS) return;
    await this.timers.add(
      'cancel-run',
      { kind: 'cancel-run', runId: timer.runId, again },
      { jobId: `cancel-run-${timer.runId}-a${again}`, delay: 1_000, removeOnComplete: true, removeOnFail: { age: 7 * 24 * 3600 } },
    );
  }

  /**
   * A task of a cancelled run that waits for an operator's approval is denied, so that nobody
   * approves work that will not be done, and the parked task wakes to stop. Best effort: a task
   * woken later stops too, before its next effect.
   */
  private async denyWaitingApproval(d: Delegation, cancelled: RunCancellation | undefined): Promise<void> {
    const { approvals, log } = this.deps;
    if (!approvals || !cancelled) return;
    let approvalId: string | undefined;
    try {
      const ckpt = TaskCheckpoint.parse(await this.deps.checkpoints.load(`task:${d.taskId}`), `task:${d.taskId}`);
      if (ckpt?.pending?.kind === 'approval') approvalId = ckpt.pending.approvalId;
    } catch (err) {
      log.warn({ err, taskId: d.taskId }, 'cancelled run: could not read the task checkpoint to find an approval it waits for');
      return;
    }
    if (!approvalId) return;
    try {
      const decided = await approvals.decide(approvalId, {
        approve: false,
        reason: `the run was cancelled: ${cancelled.reason}`,
        by: cancelled.by,
      });
      this.deps.events.emit(approvalResolvedEvent(decided));
    } catch (err) {
      if (err instanceof ApprovalError && (err.code === 'already_decided' || err.code === 'not_found')) return;
      log.warn(
        { err, approvalId, taskId: d.taskId },
        'cancelled run: could not deny the approval its task waits for; the task stops when it wakes',
      );
    }
  }

  /**
   * Time parked for an operator's approval does not count against a task's deadline (see
   * `taskDeadline`): when the task has waited, the backstop fires again at the moved deadline
   * instead of ending the task now. Returns whether it did so.
   */
  private async rearmIfPaused(moved: number, runId: string, d: Delegation): Promise<boolean> {
    let ckpt;
    try {
      ckpt = TaskCheckpoint.parse(await this.deps.checkpoints.load(`task:${d.taskId}`), `task:${d.taskId}`);
    } catch {
      return false;
    }
    if (!ckpt || (!ckpt.approvalWaitMs && ckpt.pending?.kind !== 'approval')) return false;
    const due = taskDeadline(d.deadlineAt, ckpt) + DEADLINE_GRACE_MS;
    if (Date.now() >= due) return false;
    // The timers of one task form a chain (task-deadline-<taskId>, then -m1, -m2, …), so a
    // handler that runs twice adds the same next one.
    const nextId = `task-deadline-${d.taskId}-m${moved + 1}`;
    await this.timers.add(
      'task-deadline',
      { kind: 'task-deadline', runId, taskId: d.taskId, moved: moved + 1 },
      { jobId: nextId, delay: due - Date.now(), removeOnComplete: true, removeOnFail: { age: 7 * 24 * 3600 } },
    );
    this.deps.log.info(
      { taskId: d.taskId, approvalWaitMs: ckpt.approvalWaitMs ?? 0, waitingNow: ckpt.pending?.kind === 'approval', timer: nextId },
      'task deadline moved by its approval wait',
    );
    return true;
  }

  private appendDelegationResults(state: RunCheckpoint): void {
    const last = state.messages[state.messages.length - 1];
    if (last?.role !== 'model') return;
    const responses = (last.calls ?? []).map((call) => {
      const d = state.delegations.find((x) => x.callId === call.id && x.round === state.round);
      const r = d?.result;
      return {
        id: call.id,
        name: call.name,
        isError: !r || r.status === 'failed',
        output: r ? (r.status === 'completed' ? r.output : { status: r.status, report: r.output }) : 'no result',
      };
    });
    state.messages.push({ role: 'tool', responses });
  }

  /**
   * Hands one delegation of a parked run to its specialist again, as a new child of the run; the
   * new delegation supersedes the old one in the answer and the run result.
   */
  private async retryDelegation(parent: Job, ckptId: string, state: RunCheckpoint, taskId: string): Promise<void> {
    const old = state.delegations.find((d) => d.taskId === taskId);
    // Its child may have finished without being collected yet; only a completed part is not retried.
    if (!old || old.result?.status === 'completed' || state.delegations.some((d) => d.retryOf === taskId)) return;
    const incident = Incident.safeParse(parent.data);
    if (!incident.success) return;
    state.delegations.push({
      taskId: taskIdFor(state.runId, state.delegations.length, old.agent),
      agent: old.agent,
      round: state.round,
      task: old.task,
      retryOf: old.taskId,
    });
    await this.deps.checkpoints.save(ckptId, state);
    await this.dispatch(parent, incident.data, state);
    await this.deps.checkpoints.save(ckptId, state);
  }

  /** Delegations that count: a retried one is superseded by its retry. */
  private current(state: RunCheckpoint): Delegation[] {
    return state.delegations.filter((d) => !state.delegations.some((r) => r.retryOf === d.taskId));
  }

  private outcomes(state: RunCheckpoint): SpecialistOutcome[] {
    return this.current(state).map((d) => ({
      name: d.agent,
      status: d.result?.status ?? 'failed',
      output: d.result?.output ?? null,
      attempts: d.result?.attempts ?? 0,
    }));
  }

  /** Route mode's answer: the specialists' reports, incomplete parts said plainly. */
  private merge(incident: Incident, state: RunCheckpoint): string {
    const lines = [`Incident ${incident.id} (${incident.reason}, ${incident.severity}): ${incident.summary}`];
    if (state.delegations.length === 0) lines.push('No specialist covers this incident; nothing was checked.');
    for (const d of this.current(state)) {
      const r = d.result;
      const status = r?.status ?? 'failed';
      lines.push('', `## ${d.agent} — ${status === 'completed' ? 'completed' : `INCOMPLETE (${status})`}`);
      lines.push(describeOutput(r?.output));
    }
    const incomplete = this.current(state)
      .filter((d) => d.result?.status !== 'completed')
      .map((d) => d.agent);
    if (incomplete.length > 0) lines.push('', `Not checked: ${incomplete.join(', ')}. Treat those parts as unknown, not as clean.`);
    return lines.join('\n');
  }

  /**
   * The run's tool calls in doubt, from every delegation's result (a retried one too: its
   * effects happened in this run), each once; undefined when there are none.
   */
  private inDoubt(state: RunCheckpoint): RunResult['inDoubt'] {
    const calls: { key: string; tool: string; agent: string }[] = [];
    for (const d of state.delegations) {
      for (const c of d.result?.inDoubt ?? [])
        if (!calls.some((x) => x.key === c.key)) calls.push({ key: c.key, tool: c.tool, agent: d.agent });
    }
    return calls.length > 0 ? { count: calls.length, calls } : undefined;
  }

  private async finish(
    ckptId: string,
    incident: Incident,
    state: RunCheckpoint,
    reply: string,
    options: { deadlineReached?: boolean } = {},
  ): Promise<RunResult> {
    const specialists = this.outcomes(state);
    const degraded = specialists.filter((s) => s.status !== 'completed' || isStalled(s.output)).length;
    const inDoubt = this.inDoubt(state);
    // Said by the coordinator in either mode: a model's answer may not mention it.
    const answer = withInDoubt(reply, inDoubt);
    const result: RunResult = {
      v: 1,
      runId: state.runId,
      incidentId: incident.id,
      // Route mode with nobody to ask has checked nothing; a delegating model may answer alone.
      // An effect whose outcome is unknown makes the run partial, however its parts ended.
      status: state.cancelled
        ? 'cancelled'
        : state.delegations.length === 0 && state.mode === 'route'
          ? 'failed'
          : degraded > 0 || options.deadlineReached || inDoubt
            ? 'partial'
            : 'completed',
      answer,
      specialists,
      stalled: degraded,
      ...(inDoubt ? { inDoubt } : {}),
      startedAt: state.startedAt,
      finishedAt: new Date().toISOString(),
      ...(state.cancelled ? { cancelled: state.cancelled } : {}),
    };
    state.result = result;
    state.phase = 'done';
    // The run is over: its deadline timers have nothing left to do (a timer that still fires
    // finds the result and does nothing). Removed while the result is saved.
    await Promise.all([
      this.deps.checkpoints.save(ckptId, state),
      ...[`run-deadline-${state.runId}`, ...state.delegations.map((d) => `task-deadline-${d.taskId}`)].map((id) =>
        this.timers
          .remove(id)
          .catch((err: unknown) =>
            this.deps.log.warn({ err, timer: id }, 'could not remove a deadline timer; it will find the run finished'),
          ),
      ),
    ]);
    this.deps.events.emit({
      type: result.status === 'failed' ? 'run.failed' : 'run.completed',
      runId: state.runId,
      incidentId: incident.id,
      data: {
        status: result.status,
        stalled: result.stalled,
        specialists: specialists.map((s) => ({ name: s.name, status: s.status })),
        answer,
        ...(inDoubt ? { inDoubt } : {}),
        ...(result.cancelled ? { cancelled: result.cancelled } : {}),
      },
    });
    return result;
  }

  private modelCalled(incident: Incident, state: RunCheckpoint, response: ModelResponse, durationMs: number): void {
    this.deps.events.emit({
      type: 'model.called',
      runId: state.runId,
      incidentId: incident.id,
      agent: 'coordinator',
      data: {
        model: response.model ?? this.deps.model.name,
        durationMs,
        calls: response.calls.map((c) => c.name),
        ...(response.usage ? { usage: response.usage } : {}),
      },
    });
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values(), this.timers, this.incidents].map((q) => q.close()));
  }
}

/** The reason of an INCOMPLETE part cut short by a cancellation. */
function cancelledReason(c: RunCancellation): string {
  return `the run was cancelled by ${c.by}: ${c.reason}`;
}

/** Specialist names from a classifier's reply: `{"specialists": [...]}`, a JSON array, or names in prose. */
export function parseRouting(text: string, known: readonly string[]): string[] {
  const candidates = [
    text.trim(),
    text.slice(text.indexOf('{'), text.lastIndexOf('}') + 1),
    text.slice(text.indexOf('['), text.lastIndexOf(']') + 1),
  ];
  for (const c of candidates) {
    if (!c) continue;
    try {
      const v = JSON.parse(c) as unknown;
      const list = Array.isArray(v) ? v : v && typeof v === 'object' ? (v as { specialists?: unknown }).specialists : undefined;
      if (Array.isArray(list)) return list.filter((x): x is string => typeof x === 'string');
    } catch {
      // not JSON; try the next form
    }
  }
  return known.filter((n) => new RegExp(`\\b${n}\\b`).test(text));
}

/**
 * The answer's line about calls in doubt: `IN DOUBT: <n> mutating tool call(s) …: <tool> by
 * <agent> (key <key>), …`, so the answer names every one whatever the model wrote.
 */
export function inDoubtLine(inDoubt: NonNullable<RunResult['inDoubt']>): string {
  const one = inDoubt.count === 1;
  const calls = inDoubt.calls.map((c) => `${c.tool} by ${c.agent} (key ${c.key})`).join('; ');
  return (
    `IN DOUBT: ${inDoubt.count} mutating tool ${one ? 'call was' : 'calls were'} sent, but whether ${one ? 'it' : 'they'} took effect is unknown; ` +
    `${one ? 'it was' : 'they were'} not retried and an operator must resolve ${one ? 'it' : 'each'} with bosun ack <key> --done|--retry|--skip: ${calls}.`
  );
}

function withInDoubt(answer: string, inDoubt: RunResult['inDoubt']): string {
  return inDoubt ? `${answer}\n\n${inDoubtLine(inDoubt)}` : answer;
}

/** A report in a few lines: its summary and findings, or its JSON. */
function describeOutput(output: unknown): string {
  if (output === undefined || output === null) return '(no output)';
  if (typeof output === 'string') return output;
  if (typeof output !== 'object') return JSON.stringify(output);
  const o = output as Record<string, unknown>;
  if (typeof o.summary !== 'string') return JSON.stringify(output, null, 2);
  const lines = [o.summary];
  const findings = Array.isArray(o.findings) ? o.findings : [];
  for (const f of findings) {
    if (f && typeof f === 'object') {
      const { title, detail } = f as { title?: unknown; detail?: unknown };
      lines.push(`- ${String(title ?? '')}${detail === undefined ? '' : `: ${String(detail)}`}`);
    } else lines.push(`- ${String(f)}`);
  }
  for (const k of ['suspectedCause', 'recommendedAction']) if (typeof o[k] === 'string') lines.push(`${k}: ${o[k] as string}`);
  return lines.join('\n');
}
