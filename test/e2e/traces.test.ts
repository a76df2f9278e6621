import { createServer, type Server } from 'node:http';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  demoConfig,
  openClient,
  openContext,
  startService,
  waitUntil,
  writeConfig,
  type Client,
  type ServiceProcess,
  type TestContext,
} from '../helpers/index.js';

// One incident is one trace, across separate processes: an in-test OTLP/HTTP receiver (JSON)
// gets the spans of the coordinator, the specialist and the gateway, and their parent/child
// links go publisher → run → delegation → task → tool call → gateway → MCP request. A task
// resumed after its specialist was SIGKILLed is a new span in the same trace, linked to the
// attempt that died (docs/observability.md, "Traces").

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: { key: string; value: Record<string, unknown> }[];
  links?: { traceId: string; spanId: string }[];
  service: string;
}

const SPAN_KIND = { INTERNAL: 1, SERVER: 2, CLIENT: 3, PRODUCER: 4, CONSUMER: 5 };

let ctx: TestContext;
let client: Client;
let receiver: Server;
let env: Record<string, string>;
const spans: OtlpSpan[] = [];
const processes: ServiceProcess[] = [];

/** An attribute's value, whatever its OTLP type. */
function attr(span: OtlpSpan, key: string): unknown {
  const v = span.attributes?.find((a) => a.key === key)?.value;
  if (!v) return undefined;
  const raw = v.stringValue ?? v.intValue ?? v.doubleValue ?? v.boolValue;
  return typeof raw === 'string' && /^\d+$/.test(raw) && v.intValue !== undefined ? Number(raw) : raw;
}

/** Ids as hex whatever the encoding (the JSON exporter writes hex; base64 is decoded). */
function hex(id: unknown): string {
  const s = typeof id === 'string' ? id : '';
  return /^[0-9a-f]*$/.test(s) ? s : Buffer.from(s, 'base64').toString('hex');
}

function startReceiver(): Promise<number> {
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { resourceSpans?: any[] };
      for (const rs of body.resourceSpans ?? []) {
        const service = String(
          (rs.resource?.attributes as { key: string; value: { stringValue?: string } }[]).find((a) => a.key === 'service.name')?.value
            .stringValue,
        );
        for (const ss of rs.scopeSpans ?? [])
          for (const s of ss.spans ?? [])
            spans.push({
              ...s,
              traceId: hex(s.traceId),
              spanId: hex(s.spanId),
              parentSpanId: s.parentSpanId ? hex(s.parentSpanId) : undefined,
              links: (s.links ?? []).map((l: { traceId: string; spanId: string }) => ({ traceId: hex(l.traceId), spanId: hex(l.spanId) })),
              service,
            });
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  return new Promise((resolve) => receiver.listen(0, '127.0.0.1', () => resolve((receiver.address() as { port: number }).port)));
}

const byName = (trace: string, name: string, service?: string) =>
  spans.filter((s) => s.traceId === trace && s.name === name && (service === undefined || s.service === service));

function one(trace: string, name: string, service?: string): OtlpSpan {
  const found = byName(trace, name, service);
  expect(
    found.map((s) => `${s.service}:${s.name}`),
    `one ${name} in ${service ?? 'any service'}`,
  ).toHaveLength(1);
  return found[0]!;
}

beforeAll(async () => {
  ctx = await openContext('traces');
  const port = await startReceiver();
  const config = demoConfig();
  config.workers = { lockDurationMs: 3_000, stalledIntervalMs: 1_000, maxStalledCount: 5 };
  env = {
    ...ctx.env,
    BOSUN_CONFIG: writeConfig(ctx, config),
    LOG_LEVEL: 'warn',
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
    OTEL_BSP_SCHEDULE_DELAY: '100',
  };
  const gateway = startService('gateway', env);
  processes.push(gateway);
  await gateway.ready();
  const rest = [startService('coordinator', env), startService('specialist', env, { name: 'specialist-1' })];
  processes.push(...rest);
  await Promise.all(rest.map((p) => p.ready()));
  client = await openClient(ctx);
}, 120_000);

afterAll(async () => {
  await client?.close();
  await Promise.all(processes.map((p) => p.stop()));
  await new Promise((r) => receiver?.close(r));
  await ctx?.close();
});

describe('traces', () => {
  it("continues the publisher's trace across the three processes, with the parent/child links of every hop", async () => {
    const traceId = randomBytes(16).toString('hex');
    const publisherSpan = randomBytes(8).toString('hex');
    const incident = {
      id: 'trace-1',
      source: 'test',
      reason: 'PodCrashLooping',
      summary: 'checkout crash-looping',
      payload: { fake: { calls: { kubernetes: [{ tool: 'demo__get_pods', args: { service: 'checkout-secret-arg' } }] } } },
    };
    // The publisher's W3C trace context rides at the top of the job data.
    const job = await client.incidents.add(
      'incident',
      { ...incident, traceparent: `00-${traceId}-${publisherSpan}-01` },
      { jobId: incident.id },
    );
    const result = await client.result(job, 60_000);
    expect(result.status).toBe('completed');
    // Each process exports its spans in batches (every 100 ms here, later on a loaded machine):
    // wait for every kind of span of the run.
    const expected = [
      'run',
      'run.resume',
      'delegate kubernetes',
      'invoke_agent kubernetes',
      'chat fake',
      'execute_tool demo__get_pods',
      'tools/call get_pods',
    ];
    await waitUntil(
      () =>
        expected.every((name) => byName(traceId, name).length > 0) &&
        byName(traceId, 'chat fake', 'bosun-specialist').length >= 2 &&
        byName(traceId, 'execute_tool demo__get_pods').length >= 2,
      30_000,
      () => `spans (received: ${spans.map((x) => `${x.service}:${x.name}:${x.traceId.slice(0, 6)}`).join(', ')})`,
    );

    const run = one(traceId, 'run', 'bosun-coordinator');
    expect(run.parentSpanId).toBe(publisherSpan);
    expect(run.kind).toBe(SPAN_KIND.CONSUMER);
    const routing = byName(traceId, 'chat fake', 'bosun-coordinator');
    expect(routing).toHaveLength(1);
    expect(routing[0]!.parentSpanId).toBe(run.spanId);
    expect(attr(routing[0]!, 'gen_ai.operation.name')).toBe('chat');
    expect(attr(routing[0]!, 'gen_ai.agent.name')).toBe('coordinator');
    expect(attr(routing[0]!, 'bosun.model.mode')).toBe('single');

    const delegation = one(traceId, 'delegate kubernetes', 'bosun-coordinator');
    expect(delegation.parentSpanId).toBe(run.spanId);
    expect(delegation.kind).toBe(SPAN_KIND.PRODUCER);

    // One attempt of the task (a second one only if a loaded machine let its lock lapse), under the delegation.
    const attempts = byName(traceId, 'invoke_agent kubernetes', 'bosun-specialist');
    for (const a of attempts) expect(a.parentSpanId).toBe(delegation.spanId);
    const attemptIds = attempts.map((a) => a.spanId);
    const models = byName(traceId, 'chat fake', 'bosun-specialist');
    expect(models.length).toBeGreaterThanOrEqual(2);
    for (const m of models) {
      expect(attemptIds).toContain(m.parentSpanId);
      expect(attr(m, 'gen_ai.provider.name')).toBe('fake');
      expect(attr(m, 'gen_ai.request.model')).toBe('fake');
      expect(Number(attr(m, 'gen_ai.usage.input_tokens'))).toBeGreaterThan(0);
    }

    const sent = one(traceId, 'execute_tool demo__get_pods', 'bosun-specialist');
    expect(sent.kind).toBe(SPAN_KIND.PRODUCER);
    expect(attemptIds).toContain(sent.parentSpanId);
    const handled = one(traceId, 'execute_tool demo__get_pods', 'bosun-tool-gateway');
    expect(handled.kind).toBe(SPAN_KIND.CONSUMER);
    expect(handled.parentSpanId).toBe(sent.spanId);
    // The demo server knows no service of that name: the tool ran and reported its own error.
    expect(attr(handled, 'bosun.tool.outcome')).toBe('tool_error');
    expect(attr(handled, 'bosun.tool.decision')).toBe('allow');
    const mcp = one(traceId, 'tools/call get_pods', 'bosun-tool-gateway');
    expect(mcp.kind).toBe(SPAN_KIND.CLIENT);
    expect(mcp.parentSpanId).toBe(handled.spanId);

    // The pass after the children finished: under the run, linked to the pass before it.
    const resume = one(traceId, 'run.resume', 'bosun-coordinator');
    expect(resume.parentSpanId).toBe(run.spanId);
    expect(resume.links?.map((l) => l.spanId)).toEqual([run.spanId]);
    expect(attr(resume, 'bosun.run.status')).toBe('completed');

    // One trace: no span of this run elsewhere, and no tool argument in any span.
    const runId = String(attr(run, 'bosun.run.id'));
    expect(spans.filter((s) => attr(s, 'bosun.run.id') === runId && s.traceId !== traceId)).toEqual([]);
    expect(JSON.stringify(spans.filter((s) => s.traceId === traceId))).not.toContain('checkout-secret-arg');
  }, 120_000);

  it('links the attempt that resumes a task after its specialist was SIGKILLed to the attempt that died, in the same trace', async () => {
    const incident = {
      id: 'trace-kill-1',
      source: 'test',
      reason: 'PodCrashLooping',
      summary: 'x',
      payload: {
        fake: { calls: { kubernetes: [{ tool: 'demo__get_pods', args: { service: 'checkout' } }] }, slowMs: { kubernetes: 1_500 } },
      },
    };
    const { job } = await client.publish(incident);
    // The first attempt's tool call span is exported (it ended), then its process dies in the next model call.
    const traceOf = () => spans.find((s) => s.name === 'run' && attr(s, 'bosun.incident.id') === incident.id)?.traceId;
    let first: OtlpSpan | undefined;
    await waitUntil(
      () =>
        (first = spans.find(
          (s) => s.traceId === traceOf() && s.name === 'execute_tool demo__get_pods' && s.service === 'bosun-specialist',
        )) !== undefined,
      30_000,
      'the first attempt tool call span',
    );
    const traceId = first!.traceId;
    const victim = processes.find((p) => p.name === 'specialist-1')!;
    victim.kill('SIGKILL');
    const replacement = startService('specialist', env, { name: 'specialist-2' });
    processes.push(replacement);
    await replacement.ready();
    const result = await client.result(job, 60_000);
    expect(result.status).toBe('completed');
    await waitUntil(() => byName(traceId, 'run.resume').length > 0, 20_000, 'the last pass span');

    // The dead attempt's own span never arrived (its process was killed before it ended); its
    // children did, and name it as their parent. The new attempt links to exactly that span.
    const died = first!.parentSpanId!;
    const attempts = byName(traceId, 'invoke_agent kubernetes', 'bosun-specialist');
    expect(attempts.map((a) => a.spanId)).not.toContain(died);
    const resumed = attempts.find((a) => (a.links ?? []).some((l) => l.spanId === died));
    expect(resumed, 'an attempt linked to the one that died').toBeDefined();
    expect(resumed!.links!.find((l) => l.spanId === died)!.traceId).toBe(traceId);
    const delegation = one(traceId, 'delegate kubernetes', 'bosun-coordinator');
    expect(resumed!.parentSpanId).toBe(delegation.spanId);
    expect(Number(attr(resumed!, 'bosun.task.pickup'))).toBeGreaterThan(1);
  }, 120_000);
});
