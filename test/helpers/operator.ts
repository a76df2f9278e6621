import { join } from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { Job, Queue } from 'bullmq';
import { DEAD_LETTER_QUEUE, INCIDENTS_QUEUE, STALL_MARKER } from '@bosun/contract';
import { demoConfig, openContext, runCli, startService, writeConfig, type ServiceProcess, type TestContext } from './index.js';

/** What the operator-command files share: a context, the dead-letter and incident queues, and seeding helpers. */
export interface OperatorFixture {
  ctx: TestContext;
  dlq: Queue;
  incidents: Queue;
  /** The demo MCP server's call log (written by the gateway's server, when there is one). */
  callLog: string;
}

/** A dead letter as the loops write it, of `kind`, at `at`. */
export function deadLetter(kind: string, at: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { v: 1, kind, marker: STALL_MARKER, at, reason: `${kind} happened\nover two lines`, ...extra };
}

/**
 * Opens the fixture before the file's tests (and closes it after), handing it to `use`. With
 * `gateway`, a real tool gateway runs too (for `ack --retry`), over the demo MCP server with no
 * approval gate: `ack --retry` re-sends a call that was already running.
 */
export function operatorFixture(label: string, options: { gateway: boolean }, use: (f: OperatorFixture) => void) {
  let f: OperatorFixture | undefined;
  let gateway: ServiceProcess | undefined;
  beforeAll(async () => {
    const ctx = await openContext(label);
    f = {
      ctx,
      dlq: new Queue(DEAD_LETTER_QUEUE, { connection: ctx.redis, prefix: ctx.prefix }),
      incidents: new Queue(INCIDENTS_QUEUE, { connection: ctx.redis, prefix: ctx.prefix }),
      callLog: join(ctx.dir, 'calls.jsonl'),
    };
    use(f);
    if (!options.gateway) return;
    const cfg = demoConfig();
    cfg.mcpServers.demo.tools = {};
    cfg.mcpServers.demo.env = { DEMO_MCP_CALL_LOG: f.callLog };
    gateway = startService('gateway', { ...ctx.env, BOSUN_CONFIG: writeConfig(ctx, cfg) });
    await gateway.ready();
  });
  afterAll(async () => {
    await gateway?.stop();
    await f?.dlq.close();
    await f?.incidents.close();
    await f?.ctx.close();
  });
  const need = (): OperatorFixture => {
    if (!f) throw new Error('the operator fixture is not open yet (used outside a test?)');
    return f;
  };
  return {
    /** Runs the bosun CLI with the context's environment and `extraEnv`. */
    bosun: (args: string[], extraEnv: Record<string, string> = {}, timeoutMs?: number) =>
      runCli({ ...need().ctx.env, ...extraEnv }, args, undefined, timeoutMs),
    /** A tool call recorded in doubt, with its dead letter; returns the dead letter's id. */
    seedInDoubt: async (key: string, tool: string, args: Record<string, unknown>, agent = 'kubernetes'): Promise<string> => {
      const { ctx, dlq } = need();
      await ctx.redis.hset(`${ctx.prefix}:toolcall:${key}`, {
        state: 'in-doubt',
        tool,
        args: JSON.stringify(args),
        runId: 'rindoubt0000000000000',
        incidentId: 'inc-in-doubt',
        agent,
        startedAt: new Date().toISOString(),
        readOnly: 'false',
      });
      const job = await dlq.add(
        'in-doubt',
        deadLetter('in-doubt', new Date().toISOString(), {
          runId: 'rindoubt0000000000000',
          incidentId: 'inc-in-doubt',
          agent,
          input: { key, tool, args },
        }),
        { jobId: `in-doubt-${key}` },
      );
      return String(job.id);
    },
    /** The data of dead letter `id` (which must exist). */
    dataOf: async (id: string): Promise<Record<string, any>> => {
      const job = await Job.fromId(need().dlq, id);
      expect(job, `dead letter ${id}`).toBeDefined();
      return job!.data as Record<string, any>;
    },
  };
}
