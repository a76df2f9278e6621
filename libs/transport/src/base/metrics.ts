import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * Every Prometheus metric Bosun exports, defined here and nowhere else (docs/observability.md
 * lists them). Recording is an in-memory increment: it never waits on I/O, so observing never
 * slows a run down. Labels hold only bounded values (statuses, kinds, agent, provider, server and
 * tool names from the config and catalog), never run, task or incident ids.
 */

/**
 * prom-client's default gauges whose names end in `_total`, which Prometheus reserves for
 * counters; left out (the by-type gauge beside each holds the same count).
 */
const COUNTER_NAMED_GAUGES = [
  'bosun_nodejs_active_handles_total',
  'bosun_nodejs_active_requests_total',
  'bosun_nodejs_active_resources_total',
];

/** Buckets of run and task durations: 1 s to 1 h. */
const LONG_BUCKETS = [1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600];
/** Buckets of model and tool calls: 10 ms to 2 min. */
const CALL_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
/** Buckets of approval waits: 5 s to 1 day. */
const WAIT_BUCKETS = [5, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 24 * 3600];

/** What the cluster looks like at one scrape (read from Redis by a {@link ClusterProbe}). */
export interface ClusterSnapshot {
  /** Job counts of each Bosun queue, by BullMQ state. */
  queues: { queue: string; waiting: number; active: number; delayed: number; failed: number; workers: number }[];
  /** Ids in the pending-approvals set. */
  approvalsPending: number;
  /** Age of the oldest of them, in seconds (0 when none). */
  oldestApprovalSeconds: number;
  /** Tool calls in doubt, waiting for an operator's `bosun ack`. */
  inDoubt: number;
}

/** Reads a {@link ClusterSnapshot}; called on scrape, never on a run's path. */
export type ClusterProbe = () => Promise<ClusterSnapshot>;

/** A tool call's outcome as counted: `ok`, `tool_error` (the tool's own isError), `error`, `in_doubt`. */
export type ToolOutcome = 'ok' | 'tool_error' | 'error' | 'in_doubt';

/** The metrics of one process, in a registry of their own. */
export class BosunMetrics {
  readonly registry = new Registry();
  /**
   * Runs started: recorded and exported by the coordinator only (registered by
   * {@link setClusterProbe}, or at the first `run.started` a process emits), so that the
   * gateway, specialists and console do not export a 0 of their own (docs/observability.md).
   */
  readonly runsStarted = new Counter({
    name: 'bosun_runs_started_total',
    help: 'Runs started (first pass of an incident job).',
    registers: [],
  });
  readonly runsFinished = this.counter('bosun_runs_finished_total', 'Runs finished, by the run result status.', ['status']);
  readonly runDuration = this.histogram('bosun_run_duration_seconds', 'Run duration, start to result.', ['status'], LONG_BUCKETS);
  readonly tasksFinished = this.counter('bosun_tasks_finished_total', 'Task results returned by specialists.', ['specialist', 'status']);
  readonly taskDuration = this.histogram(
    'bosun_task_duration_seconds',
    'Task duration, dispatch to result (approval waits included).',
    ['specialist', 'status'],
    LONG_BUCKETS,
  );
  readonly modelCalls = this.counter('bosun_model_calls_total', 'Model calls.', ['agent', 'provider', 'outcome']);
  readonly modelDuration = this.histogram(
    'bosun_model_call_duration_seconds',
    'Model call latency.',
    ['agent', 'provider', 'outcome'],
    CALL_BUCKETS,
  );
  readonly modelTokens = this.counter('bosun_model_tokens_total', 'Tokens reported by the model, by direction.', [
    'agent',
    'provider',
    'direction',
  ]);
  readonly toolCalls = this.counter('bosun_tool_calls_total', 'Tool calls the gateway answered.', [
    'server',
    'tool',
    'outcome',
    'decision',
  ]);
  readonly toolDuration = this.histogram(
    'bosun_tool_call_duration_seconds',
    'Tool call latency at the gateway (policy, record, MCP call).',
    ['server', 'tool', 'outcome'],
    CALL_BUCKETS,
  );
  readonly approvalsRequested = this.counter('bosun_approvals_requested_total', 'Approval requests written.', []);
  readonly approvalWait = this.histogram(
    'bosun_approval_wait_seconds',
    'Time from the task parking for an approval to the decision.',
    ['status'],
    WAIT_BUCKETS,
  );
  readonly deadLetters = this.counter('bosun_dead_letters_total', 'Dead letters written.', ['kind']);
  readonly events = this.counter('bosun_events_total', 'Run events emitted, by type.', ['type']);
  readonly eventsDropped = this.counter('bosun_events_dropped_total', 'Events dropped (NATS away too long, or never acknowledged).', []);
  readonly lockErrors = this.counter(
    'bosun_worker_lock_errors_total',
    'Job locks a worker lost, by queue and how it learnt it: renewal (BullMQ could not renew the lock), fenced (a lock-checked write was refused), finish (BullMQ could not complete or fail the job under its lock).',
    ['queue', 'kind'],
  );
  /** Failed reads of the cluster: exported with the cluster's gauges, by the process that reads them. */
  readonly probeErrors = new Counter({
    name: 'bosun_metrics_probe_errors_total',
    help: 'Scrapes whose read of the queues and keys failed (their gauges kept old values).',
    registers: [],
  });
  private probe: ClusterProbe | undefined;
  /** The snapshot of the scrape under way, shared by its gauges. */
  private snapshot: Promise<ClusterSnapshot | undefined> | undefined;

  /**
   * The cluster's figures, read from Redis on scrape: made now, exported only once a process
   * says it reads them ({@link setClusterProbe}: the coordinator).
   */
  private readonly clusterMetrics: (Counter | Gauge)[];
  /** The metrics of {@link clusterMetrics} registered so far. */
  private readonly registered = new Set<Counter | Gauge>();
  private processMetrics = false;

  constructor() {
    const scrape = this.scrape.bind(this);
    const queueJobs = new Gauge({
      name: 'bosun_queue_jobs',
      help: 'Jobs of each Bosun queue, by state.',
      labelNames: ['queue', 'state'],
      registers: [],
      async collect() {
        const snap = await scrape();
        this.reset();
        for (const q of snap?.queues ?? [])
          for (const state of ['waiting', 'active', 'delayed', 'failed'] as const) this.set({ queue: q.queue, state }, q[state]);
      },
    });
    const queueWorkers = new Gauge({
      name: 'bosun_queue_workers',
      help: 'Workers connected to each Bosun queue.',
      labelNames: ['queue'],
      registers: [],
      async collect() {
        const snap = await scrape();
        this.reset();
        for (const q of snap?.queues ?? []) this.set({ queue: q.queue }, q.workers);
      },
    });
    this.clusterMetrics = [
      queueJobs,
      queueWorkers,
      this.snapshotGauge('bosun_approvals_pending', 'Approval requests waiting for a decision.', (s) => s.approvalsPending),
      this.snapshotGauge(
        'bosun_approval_oldest_pending_seconds',
        'Age of the oldest approval request waiting for a decision.',
        (s) => s.oldestApprovalSeconds,
      ),
      this.snapshotGauge('bosun_tool_calls_in_doubt', 'Tool calls in doubt, waiting for bosun ack.', (s) => s.inDoubt),
      this.probeErrors,
      this.runsStarted,
    ];
  }

  /**
   * Adds Node's process metrics (CPU, memory, open handles, event loop lag, GC) under
   * `bosun_process_…`/`bosun_nodejs_…`, from prom-client's defaults, less the three gauges that
   * prom-client names like counters (`bosun_nodejs_active_handles_total`, `…_requests_total`,
   * `…_resources_total`: `promtool check metrics` refuses them). Their value is the sum of the
   * by-type gauge beside each (`sum without (type) (bosun_nodejs_active_handles)`). A second call
   * adds nothing.
   */
  collectProcessMetrics(): void {
    if (this.processMetrics) return;
    this.processMetrics = true;
    collectDefaultMetrics({ register: this.registry, prefix: 'bosun_' });
    for (const name of COUNTER_NAMED_GAUGES) this.registry.removeSingleMetric(name);
  }

  /**
   * Sets what reads the cluster's queues, approvals and in-doubt calls on scrape. The first
   * probe also makes this process export the cluster's figures (the queue, approval and in-doubt
   * gauges, the failed reads, and the runs started): the coordinator calls it, so no other process
   * exports them, not even as 0 (docs/observability.md, "Where to scrape"). `undefined` stops the
   * reads (the gauges then keep no value; the counters stay).
   */
  setClusterProbe(probe: ClusterProbe | undefined): void {
    this.probe = probe;
    if (probe) for (const metric of this.clusterMetrics) this.register(metric);
  }

  /** The Prometheus text exposition of every metric; the cluster is read once for it. */
  async text(): Promise<string> {
    const snapshot = this.readProbe();
    this.snapshot = snapshot;
    try {
      return await this.registry.metrics();
    } finally {
      if (this.snapshot === snapshot) this.snapshot = undefined;
    }
  }

  /** The content type of {@link text}. */
  get contentType(): string {
    return this.registry.contentType;
  }

  /** An event was emitted: counted by type, and a run started or approval requested counted too. */
  event(type: string): void {
    this.events.inc({ type });
    if (type === 'run.started') {
      // Counted where it happens: a process that runs incidents without a probe still counts them.
      this.register(this.runsStarted);
      this.runsStarted.inc();
    } else if (type === 'approval.requested') this.approvalsRequested.inc();
  }

  /** A run ended with `status` after `seconds`. */
  runFinished(status: string, seconds: number): void {
    this.runsFinished.inc({ status });
    observe(this.runDuration, { status }, seconds);
  }

  /** A specialist returned a task result. */
  taskFinished(specialist: string, status: string, seconds: number): void {
    this.tasksFinished.inc({ specialist, status });
    observe(this.taskDuration, { specialist, status }, seconds);
  }

  /** One model call and the tokens it reported. */
  modelCall(call: {
    agent: string;
    provider: string;
    outcome: 'ok' | 'error';
    seconds: number;
    inputTokens?: number;
    outputTokens?: number;
  }) {
    const { agent, provider, outcome } = call;
    this.modelCalls.inc({ agent, provider, outcome });
    observe(this.modelDuration, { agent, provider, outcome }, call.seconds);
    if (isCount(call.inputTokens)) this.modelTokens.inc({ agent, provider, direction: 'input' }, call.inputTokens);
    if (isCount(call.outputTokens)) this.modelTokens.inc({ agent, provider, direction: 'output' }, call.outputTokens);
  }

  /** One tool call answered by the gateway. `decision`: `allow`, `ask` (approved), `refuse`, `unknown` (no such tool), `recorded` (answered from its record). */
  toolCall(call: { server: string; tool: string; outcome: ToolOutcome; decision: string; seconds: number }): void {
    const { server, tool, outcome, decision } = call;
    this.toolCalls.inc({ server, tool, outcome, decision });
    observe(this.toolDuration, { server, tool, outcome }, call.seconds);
  }

  /** A task saw the decision on its approval, `seconds` after it parked. */
  approvalDecided(status: string, seconds: number): void {
    observe(this.approvalWait, { status }, seconds);
  }

  private counter<L extends string>(name: string, help: string, labelNames: L[]): Counter<L> {
    return new Counter({ name, help, labelNames, registers: [this.registry] });
  }

  private histogram<L extends string>(name: string, help: string, labelNames: L[], buckets: number[]): Histogram<L> {
    return new Histogram({ name, help, labelNames, buckets, registers: [this.registry] });
  }

  /** Adds `metric` to the registry, once. */
  private register(metric: Counter | Gauge): void {
    if (this.registered.has(metric)) return;
    this.registered.add(metric);
    this.registry.registerMetric(metric);
  }

  private snapshotGauge(name: string, help: string, pick: (s: ClusterSnapshot) => number): Gauge {
    const scrape = this.scrape.bind(this);
    return new Gauge({
      name,
      help,
      registers: [],
      async collect() {
        const snap = await scrape();
        if (snap) this.set(pick(snap));
      },
    });
  }

  /** The snapshot of the scrape under way (one probe per scrape), or a fresh one. */
  private scrape(): Promise<ClusterSnapshot | undefined> {
    return this.snapshot ?? this.readProbe();
  }

  /** Reads the probe; a failed read leaves the gauges out of date, never fails the scrape. */
  private readProbe(): Promise<ClusterSnapshot | undefined> {
    const probe = this.probe;
    if (!probe) return Promise.resolve(undefined);
    return probe().catch(() => {
      // Counted, not thrown: a scrape while Redis is away still serves the process metrics.
      this.probeErrors.inc();
      return undefined;
    });
  }
}

/** Observes a duration; one that is not a number (a clock or a job without its time) is left out rather than thrown at the caller. */
function observe<L extends string>(h: Histogram<L>, labels: Record<L, string>, seconds: number): void {
  if (Number.isFinite(seconds) && seconds >= 0) h.observe(labels as Partial<Record<L, string>>, seconds);
}

/** Whether a token count can be added to a counter. */
function isCount(n: number | undefined): n is number {
  return n !== undefined && Number.isFinite(n) && n > 0;
}

/**
 * The metrics of this process. One per process, as Prometheus scrapes a process: the places
 * that record (the event publisher, dead letters, the loops' glue) and the health server that
 * serves `/metrics` share it without threading it through every constructor.
 */
export const metrics = new BosunMetrics();
