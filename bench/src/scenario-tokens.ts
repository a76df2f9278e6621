/**
 * Scenario 12: what the standard incident sends to the model. The coordinator and the
 * `kubernetes` specialist run on `provider: openai` against a local server in the shape of the
 * recorded OpenAI responses ({@link TokenServer}), which counts every request's tokens with
 * OpenAI's tokenizer and answers with the fake model's plan. Reported, per agent and turn: input
 * and output tokens (the usage the server answers, as it reaches the `model.called` events), the
 * share of each request that is a stable prefix a provider can cache, and the tool-catalog bytes
 * per request. See docs/scaling.md, "Token cost per incident".
 */
import { allRunsSubject, INCIDENTS_QUEUE } from '@bosun/contract';
import { Cluster, buildConfig } from './cluster.js';
import { IncidentClient, withPrefix, type Ctx, type Row, type ScenarioResult } from './scenarios.js';
import { TokenServer, sharedPrefix, type CapturedRequest } from './token-server.js';
import { checkAbort, fmt, mean, note } from './util.js';

/** The scenario's number (after the durable peers' 10 and 11). */
export const TOKENS_ID = 14;

/** What one agent's turn sent, over the incidents measured. */
export interface TurnFigures {
  agent: string;
  turn: number;
  inputTokens: number;
  cachedTokens: number;
  outputTokens: number;
  requestBytes: number;
  toolBytes: number;
  /** Of this request's prompt bytes: shared with the agent's turn before in the same task, or (turn 1) with its turn 1 of the incident before. */
  stablePrefixShare: number;
  /** Of the request it is compared with: the share this one repeats byte for byte (1: all of it, the whole earlier request is cacheable). */
  earlierIntact: number;
  /** Our own estimate (4 characters a token) of the same prompt. */
  estimateTokens: number;
}

/** The requests of one incident, by agent, in the order they came. */
function byAgent(requests: readonly CapturedRequest[]): Map<string, CapturedRequest[]> {
  const out = new Map<string, CapturedRequest[]>();
  for (const r of requests) out.set(r.agent, [...(out.get(r.agent) ?? []), r]);
  return out;
}

/**
 * Per agent and turn, the mean over the incidents measured (every incident but the first, whose
 * turn 1 has no earlier incident to share a prefix with).
 */
export function turnFigures(requests: readonly CapturedRequest[], incidents: readonly string[]): TurnFigures[] {
  const perIncident = incidents.map((id) => byAgent(requests.filter((r) => r.incident === id)));
  const acc = new Map<string, TurnFigures[]>();
  for (let i = 1; i < perIncident.length; i++) {
    for (const [agent, turns] of perIncident[i]!) {
      const before = perIncident[i - 1]!.get(agent);
      turns.forEach((r, t) => {
        const previous = t === 0 ? before?.[0] : turns[t - 1];
        const shared = previous ? sharedPrefix(previous.prompt, r.prompt) : 0;
        const key = `${agent}#${t + 1}`;
        acc.set(key, [
          ...(acc.get(key) ?? []),
          {
            agent,
            turn: t + 1,
            inputTokens: r.promptTokens,
            cachedTokens: r.cachedTokens,
            outputTokens: r.completionTokens,
            requestBytes: r.bodyBytes,
            toolBytes: r.toolBytes,
            stablePrefixShare: shared / r.prompt.length,
            earlierIntact: previous ? shared / previous.prompt.length : 0,
            estimateTokens: Math.ceil(r.prompt.length / 4),
          },
        ]);
      });
    }
  }
  return [...acc.values()].map((list) => {
    const m = (f: (x: TurnFigures) => number) => mean(list.map(f));
    return {
      agent: list[0]!.agent,
      turn: list[0]!.turn,
      inputTokens: m((x) => x.inputTokens),
      cachedTokens: m((x) => x.cachedTokens),
      outputTokens: m((x) => x.outputTokens),
      requestBytes: m((x) => x.requestBytes),
      toolBytes: m((x) => x.toolBytes),
      stablePrefixShare: m((x) => x.stablePrefixShare),
      earlierIntact: m((x) => x.earlierIntact),
      estimateTokens: m((x) => x.estimateTokens),
    };
  });
}

const pct = (x: number) => `${fmt(100 * x, 0)} %`;
const int = (x: number) => Math.round(x).toLocaleString('en-US');

/** The table rows of scenario 14 from its turn figures. */
export function tokenRows(turns: readonly TurnFigures[], n: number, eventsAgree: boolean): Row[] {
  const sum = (f: (t: TurnFigures) => number, list = turns) => list.reduce((a, t) => a + f(t), 0);
  const agents = [...new Set(turns.map((t) => t.agent))];
  const perAgent = (f: (t: TurnFigures) => number) =>
    agents
      .map(
        (a) =>
          `${a} ${turns
            .filter((t) => t.agent === a)
            .map((t) => int(f(t)))
            .join(' / ')}`,
      )
      .join('; ');
  const specialist = turns.filter((t) => t.agent !== 'coordinator');
  const later = specialist.filter((t) => t.turn > 1);
  const input = sum((t) => t.inputTokens);
  return [
    {
      scenario: `${TOKENS_ID} tokens (${n} standard incidents, OpenAI shape)`,
      metric: 'input tokens per incident (o200k count), by agent and turn',
      bosun: `${int(input)}: ${perAgent((t) => t.inputTokens)}`,
      value: input,
      better: 'lower',
      result: 'n/a',
    },
    {
      scenario: '',
      metric: 'output tokens per incident, by agent and turn',
      bosun: `${int(sum((t) => t.outputTokens))}: ${perAgent((t) => t.outputTokens)}`,
      value: sum((t) => t.outputTokens),
      better: 'lower',
      result: 'n/a',
    },
    {
      scenario: '',
      metric: 'of the input, cached by the provider (prefix ≥ 1,024 tokens, steps of 128)',
      bosun: `${int(sum((t) => t.cachedTokens))} (${pct(sum((t) => t.cachedTokens) / input)})`,
      value: sum((t) => t.cachedTokens) / input,
      better: 'higher',
      result: 'n/a',
    },
    {
      scenario: '',
      metric: 'stable prefix, specialist turns 2+ (bytes shared with the turn before; of that turn, intact)',
      bosun: `${later.map((t) => pct(t.stablePrefixShare)).join(' / ') || '—'}; ${later.map((t) => pct(t.earlierIntact)).join(' / ')}`,
      value: mean(later.map((t) => t.stablePrefixShare)),
      better: 'higher',
      result: 'n/a',
    },
    {
      scenario: '',
      metric: "stable prefix, turn 1 (bytes shared with the previous incident's turn 1)",
      bosun: agents.map((a) => `${a} ${pct(turns.find((t) => t.agent === a && t.turn === 1)?.stablePrefixShare ?? NaN)}`).join('; '),
      value: mean(turns.filter((t) => t.turn === 1).map((t) => t.stablePrefixShare)),
      better: 'higher',
      result: 'n/a',
    },
    {
      scenario: '',
      metric: 'tool-catalog bytes per specialist request (share of the request)',
      bosun: `${int(mean(specialist.map((t) => t.toolBytes)))} (${pct(sum((t) => t.toolBytes, specialist) / sum((t) => t.requestBytes, specialist))})`,
      value: mean(specialist.map((t) => t.toolBytes)),
      better: 'lower',
      result: 'n/a',
    },
    {
      scenario: '',
      metric: 'request bytes per incident',
      bosun: int(sum((t) => t.requestBytes)),
      value: sum((t) => t.requestBytes),
      better: 'lower',
      result: 'n/a',
    },
    {
      scenario: '',
      metric: 'our estimate (4 chars a token) / the o200k count; usage in model.called events = the server’s',
      bosun: `${fmt(sum((t) => t.estimateTokens) / input, 2)}×; ${eventsAgree ? 'yes' : 'NO'}`,
      value: sum((t) => t.estimateTokens) / input,
      result: eventsAgree ? 'met' : 'missed',
    },
  ];
}

/** One pass: `n` standard incidents one at a time, `kubernetes` on `provider`; the incidents' ids and whether the events' usage matched. */
async function runPass(
  ctx: Ctx,
  server: TokenServer,
  n: number,
  provider: 'openai' | 'anthropic',
): Promise<{ ids: string[]; agree: boolean }> {
  return withPrefix(ctx, async (prefix) => {
    note(`${TOKENS_ID} tokens: ${n} standard incidents, coordinator on openai and kubernetes on ${provider}, against a local server`);
    const config = buildConfig(ctx.root, { toolTransport: ctx.toolTransport }) as {
      coordinator: { model?: unknown };
      specialists: Record<string, { model?: unknown }>;
    };
    config.coordinator.model = { provider: 'openai', name: 'bench-coordinator', baseUrl: server.baseUrl };
    config.specialists.kubernetes!.model =
      provider === 'openai'
        ? { provider, name: 'bench-kubernetes', baseUrl: server.baseUrl }
        : { provider, name: 'bench-kubernetes', baseUrl: server.origin, contextTokens: 200_000 };
    const cluster = new Cluster({
      root: ctx.root,
      prefix,
      redisUrl: ctx.redisUrl,
      natsUrl: ctx.natsUrl,
      redis: ctx.redis,
      config,
      env: () => ({ OPENAI_API_KEY: 'bench-local-key', ANTHROPIC_API_KEY: 'bench-local-key', LOG_LEVEL: 'info' }),
    });
    const usageInEvents = new Map<string, number>();
    const sub = ctx.nc?.subscribe(allRunsSubject(prefix), {
      callback: (err, msg) => {
        if (err) return;
        try {
          const e = msg.json<{ type: string; incidentId: string; data?: { usage?: { inputTokens?: number } } }>();
          if (e.type === 'model.called')
            usageInEvents.set(e.incidentId, (usageInEvents.get(e.incidentId) ?? 0) + (e.data?.usage?.inputTokens ?? 0));
        } catch {
          // Not an event of ours: nothing to count.
        }
      },
    });
    try {
      await cluster.start('tool-gateway');
      await Promise.all([cluster.start('coordinator'), cluster.start('specialist')]);
      const client = await IncidentClient.open(ctx, prefix, INCIDENTS_QUEUE);
      const ids: string[] = [];
      try {
        for (let i = 0; i < n; i++) {
          checkAbort();
          const id = `${provider}-${i}`;
          server.incident = id;
          const r = await client.one(id, 30_000);
          if (r.status !== 'completed') throw new Error(`incident ${id} ended ${r.status}, not completed`);
          ids.push(id);
        }
      } finally {
        await client.close();
      }
      // The last events may still be on their way to the subscription.
      const deadline = Date.now() + 5_000;
      const sent = (id: string) => server.requests.filter((r) => r.incident === id).reduce((a, r) => a + r.promptTokens, 0);
      const agreed = () => ids.every((id) => usageInEvents.get(id) === sent(id));
      while (Date.now() < deadline && !agreed()) await new Promise((r) => setTimeout(r, 50));
      return { ids, agree: agreed() };
    } finally {
      sub?.unsubscribe();
      await cluster.stop();
    }
  });
}

/** The rows of the Anthropic pass: the specialist's input, its cache reads and writes, and what that bills as. */
export function anthropicRows(requests: readonly CapturedRequest[], ids: readonly string[]): Row[] {
  const mine = requests.filter((r) => r.agent === 'kubernetes' && ids.slice(1).includes(r.incident));
  const per = (f: (r: CapturedRequest) => number) => mine.reduce((a, r) => a + f(r), 0) / Math.max(1, ids.length - 1);
  const input = per((r) => r.promptTokens);
  const read = per((r) => r.cachedTokens);
  const write = per((r) => r.cacheWriteTokens ?? 0);
  // Anthropic bills a cache write at 1.25× and a read at 0.1× the input rate.
  const billed = input - read - write + 1.25 * write + 0.1 * read;
  const turns = [...new Set(mine.map((r) => r.incident))].length;
  const byTurn = (f: (r: CapturedRequest) => number) => {
    const first = mine.filter((r) => r.incident === mine[0]?.incident);
    return first.map((r) => int(f(r))).join(' / ');
  };
  return [
    {
      scenario: `${TOKENS_ID} tokens, kubernetes on the Anthropic shape (${turns} incidents)`,
      metric: 'input tokens per incident (o200k count as a proxy), by turn; cache reads; cache writes',
      bosun: `${int(input)} (${byTurn((r) => r.promptTokens)}); read ${int(read)} (${byTurn((r) => r.cachedTokens)}); written ${int(write)}`,
      value: input,
      better: 'lower',
      result: 'n/a',
    },
    {
      scenario: '',
      metric: 'billed input per incident, in input-token units (writes 1.25×, reads 0.1×)',
      bosun: `${int(billed)} (${pct(billed / input)} of the input)`,
      value: billed,
      better: 'lower',
      result: 'n/a',
    },
  ];
}

/** Scenario 12; see the file's comment. */
export async function scenarioTokens(ctx: Ctx): Promise<ScenarioResult> {
  const n = ctx.quick ? 3 : 6;
  const result: ScenarioResult = { id: TOKENS_ID, name: 'tokens', rows: [], notes: [], data: { n } };
  const server = await TokenServer.start();
  try {
    const openai = await runPass(ctx, server, n, 'openai');
    const turns = turnFigures(server.requests, openai.ids);
    result.rows.push(...tokenRows(turns, n - 1, openai.agree));
    result.data.turns = turns;
    const last = server.requests.filter((r) => r.incident === openai.ids[openai.ids.length - 1]);
    // One incident's requests as sent, for reading what a turn carries.
    result.data.lastIncident = last.map((r) => ({ agent: r.agent, bytes: r.bodyBytes, body: r.body }));
    result.notes.push(
      `the figures are the mean of incidents 2–${n} (turn 1's stable prefix compares with the incident before); tokens counted with o200k_base (gpt-tokenizer), tools first, then each message as sent`,
    );
    checkAbort();
    const anthropic = await runPass(ctx, server, n, 'anthropic');
    result.rows.push(...anthropicRows(server.requests, anthropic.ids));
    if (!anthropic.agree) result.notes.push('Anthropic pass: the usage in the model.called events differs from the server’s');
    result.data.anthropic = server.requests
      .filter((r) => anthropic.ids.includes(r.incident) && r.agent === 'kubernetes')
      .map((r) => ({ incident: r.incident, input: r.promptTokens, read: r.cachedTokens, write: r.cacheWriteTokens }));
  } finally {
    await server.close();
  }
  return result;
}
