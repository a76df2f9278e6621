/**
 * The floor: a raw BullMQ chain with the same hops as a standard Bosun incident and no-op
 * processors, in the same process layout (three processes: one per role).
 *
 *   raw-incidents job ──(child in a flow; parent parked in waiting-children)──► raw-tasks job
 *   raw-tasks job ──► raw-tools job #1, awaited with waitUntilFinished ──► raw-tools job #2, awaited
 *   raw-tasks job returns ──► the parent moves back to wait, resumes, reads the child's value, returns
 *
 * Run as a role: `node bench/dist/raw-chain.js <incident|task|tool> <prefix> <concurrency> <redisUrl>`.
 */
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Queue, QueueEvents, WaitingChildrenError, Worker, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { ManagedProcess } from './cluster.js';

export const RAW_INCIDENTS = 'raw-incidents';
export const RAW_TASKS = 'raw-tasks';
export const RAW_TOOLS = 'raw-tools';

export type RawRole = 'incident' | 'task' | 'tool';
export const RAW_ROLES: readonly RawRole[] = ['tool', 'task', 'incident'];

/** The three processes of the raw chain. */
export class RawChain {
  readonly procs: ManagedProcess[] = [];

  static async start(opts: { root: string; prefix: string; redisUrl: string; concurrency: Record<RawRole, number> }): Promise<RawChain> {
    const chain = new RawChain();
    const script = fileURLToPath(import.meta.url);
    try {
      for (const role of RAW_ROLES) {
        const proc = new ManagedProcess({
          name: `raw-${role}`,
          script,
          args: [role, opts.prefix, String(opts.concurrency[role]), opts.redisUrl],
          cwd: opts.root,
          env: { PATH: process.env.PATH, HOME: process.env.HOME },
        });
        chain.procs.push(proc);
        await proc.proc.waitForLine((l) => l === `raw-${role} ready`, 30_000, `"raw-${role} ready"`);
      }
    } catch (err) {
      await chain.stop();
      throw err;
    }
    return chain;
  }

  async stop(): Promise<void> {
    await Promise.all(this.procs.map((p) => p.stop(20_000)));
  }
}

// ---------------------------------------------------------------------------------------------
// The role processes

async function runRole(role: RawRole, prefix: string, concurrency: number, redisUrl: string): Promise<void> {
  // Like the services: one shared connection for queues and workers (BullMQ duplicates it for
  // blocking reads), a separate one for QueueEvents.
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const closers: (() => Promise<unknown>)[] = [];
  let worker: Worker;
  const common = { connection: redis, prefix, concurrency, lockDuration: 10_000, stalledInterval: 5_000, maxStalledCount: 2 };

  if (role === 'incident') {
    const tasks = new Queue(RAW_TASKS, { connection: redis, prefix });
    closers.push(() => tasks.close());
    worker = new Worker(
      RAW_INCIDENTS,
      async (job: Job, token?: string) => {
        if ((job.data as { step?: string }).step !== 'waiting') {
          await tasks.add(
            'task',
            { incidentId: job.id },
            { jobId: `${job.id}-task`, parent: { id: job.id!, queue: job.queueQualifiedName } },
          );
          await job.updateData({ ...job.data, step: 'waiting' });
        }
        if (token && (await job.moveToWaitingChildren(token))) throw new WaitingChildrenError();
        const values = await job.getChildrenValues();
        return { status: 'completed', children: Object.keys(values).length };
      },
      common,
    );
  } else if (role === 'task') {
    const tools = new Queue(RAW_TOOLS, { connection: redis, prefix });
    const eventsConnection = redis.duplicate();
    const events = new QueueEvents(RAW_TOOLS, { connection: eventsConnection, prefix });
    events.setMaxListeners(0);
    await events.waitUntilReady();
    closers.push(
      () => events.close(),
      () => tools.close(),
      () => Promise.resolve(eventsConnection.disconnect()),
    );
    worker = new Worker(
      RAW_TASKS,
      async (job: Job) => {
        for (let i = 0; i < 2; i++) {
          const call = await tools.add('tool-call', { taskId: job.id, i }, { jobId: `${job.id}-c${i}` });
          await call.waitUntilFinished(events, 60_000);
        }
        return { status: 'completed' };
      },
      common,
    );
  } else {
    worker = new Worker(RAW_TOOLS, () => Promise.resolve({ content: [{ type: 'text', text: 'ok' }] }), common);
  }
  worker.on('error', (err) => process.stderr.write(`raw-${role} worker error: ${err.message}\n`));
  await worker.waitUntilReady();
  process.stdout.write(`raw-${role} ready\n`);

  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    setTimeout(() => process.exit(1), 15_000).unref();
    void (async () => {
      await worker.close();
      // Exiting: a closer that fails must not keep the others from running (the timer above exits anyway).
      for (const c of closers) await c().catch(() => undefined);
      await redis.quit().catch(() => redis.disconnect());
      process.exit(0);
    })();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

const invokedDirectly = (() => {
  try {
    return !!process.argv[1] && realpathSync(process.argv[1]) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
})();

if (invokedDirectly) {
  const [role, prefix, concurrency, redisUrl] = process.argv.slice(2);
  if (!role || !['incident', 'task', 'tool'].includes(role) || !prefix || !concurrency || !redisUrl) {
    process.stderr.write('usage: raw-chain.js <incident|task|tool> <prefix> <concurrency> <redisUrl>\n');
    process.exit(2);
  }
  runRole(role as RawRole, prefix, Number(concurrency), redisUrl).catch((err: unknown) => {
    process.stderr.write(`raw-${role}: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  });
}
