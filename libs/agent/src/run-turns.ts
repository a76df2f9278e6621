/**
 * The coordinator's model turns: route mode's one classifier call, and delegate mode's chat
 * turns, whose tool calls are the delegations.
 */
import { sumUsage, taskIdFor, type Incident } from '@bosun/contract';
import { priceOf, specialistConfig } from '@bosun/config';
import {
  DELEGATE_TOOL_PREFIX,
  delegateToolName,
  renderIncident,
  type ModelRequest,
  type ModelResponse,
  type ToolDeclaration,
} from '@bosun/models';
import { modelCallUsage } from './budget.js';
import type { RunContext } from './run-parts.js';
import { DEFAULT_DELEGATE_INSTRUCTION, DEFAULT_ROUTE_INSTRUCTION, parseRouting } from './run-text.js';
import { withRunbook } from './runbook.js';

/** Asks the model, and says so in a `model.called` event. */
async function ask(ctx: RunContext, incident: Incident, request: ModelRequest): Promise<ModelResponse> {
  const { model, events, clock } = ctx.deps;
  const started = clock.now();
  const response = await model.generate(request, ctx.signal ? { signal: ctx.signal } : {});
  // The coordinator's own spending, saved with the turn it belongs to.
  const price = priceOf(ctx.deps.config, response.fallback?.to ?? model.name);
  ctx.state.usage = sumUsage(ctx.state.usage, modelCallUsage(response.usage, price, response.fallback !== undefined));
  // Its whole total, never an increment: a call repeated after a crash is not counted twice.
  await ctx.deps.usage?.record(ctx.state.runId, 'coordinator', ctx.state.usage);
  events.emit({
    type: 'model.called',
    runId: ctx.state.runId,
    incidentId: incident.id,
    agent: 'coordinator',
    data: {
      model: response.model ?? model.name,
      durationMs: clock.now() - started,
      calls: response.calls.map((c) => c.name),
      ...(response.usage ? { usage: response.usage } : {}),
      ...(response.fallback ? { fallback: response.fallback } : {}),
    },
  });
  return response;
}

/** Route mode's system instruction: the instruction, the specialists and the usual routes. */
function routeSystem(ctx: RunContext): string {
  const { config } = ctx.deps;
  const known = Object.keys(config.specialists);
  return [
    config.coordinator.instruction ?? DEFAULT_ROUTE_INSTRUCTION,
    '',
    'Specialists:',
    ...known.map((n) => `- ${n}: ${config.specialists[n]?.description ?? ''}`),
    '',
    'Usual routes (incident reason -> specialists):',
    ...Object.entries(config.coordinator.routes).map(([r, t]) => `- ${r} -> ${t.join(', ')}`),
  ].join('\n');
}

/** The JSON answer route mode asks for where the provider supports structured output (`parseRouting` reads it). */
function routeSchema(known: readonly string[]): NonNullable<ModelRequest['responseSchema']> {
  return {
    name: 'route',
    schema: {
      type: 'object',
      properties: { specialists: { type: 'array', items: known.length > 0 ? { type: 'string', enum: [...known] } : { type: 'string' } } },
      required: ['specialists'],
      additionalProperties: false,
    },
  };
}

/**
 * Route mode: one classifier call names the specialists (the default route when it names none),
 * each of which gets a delegation. Names the config does not know are kept: they become `failed`
 * parts at dispatch.
 */
export async function route(ctx: RunContext, incident: Incident): Promise<void> {
  const { config, events } = ctx.deps;
  const { state } = ctx;
  const known = Object.keys(config.specialists);
  const response = await ask(ctx, incident, {
    agent: 'coordinator',
    mode: 'single',
    system: withRunbook(routeSystem(ctx), incident),
    messages: [{ role: 'user', text: renderIncident(incident) }],
    tools: [],
    responseSchema: routeSchema(known),
  });
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

/** Delegate mode's tools: one `delegate_<name>` per specialist, none in the final round. */
function delegateTools(ctx: RunContext, finalRound: boolean): ToolDeclaration[] {
  if (finalRound) return [];
  return Object.entries(ctx.deps.config.specialists).map(([name, s]) => ({
    name: delegateToolName(name),
    description: `Delegate part of the investigation to the ${name} specialist: ${s.description}`,
    parameters: {
      type: 'object',
      properties: { task: { type: 'string', description: 'What this specialist should find out.' } },
      required: ['task'],
    },
  }));
}

/** Asks the chat model for its next turn and keeps it; returns the answer when it gives one (no calls). */
async function chatTurn(ctx: RunContext, incident: Incident): Promise<string | undefined> {
  const { config } = ctx.deps;
  const { state } = ctx;
  const finalRound = state.round >= config.coordinator.maxRounds;
  if (finalRound) state.messages.push({ role: 'user', text: 'No more delegation rounds are available. Answer now with what you have.' });
  const response = await ask(ctx, incident, {
    agent: 'coordinator',
    mode: 'chat',
    system: withRunbook(config.coordinator.instruction ?? DEFAULT_DELEGATE_INSTRUCTION, incident),
    messages: state.messages,
    tools: delegateTools(ctx, finalRound),
  });
  state.messages.push({
    role: 'model',
    ...(response.text ? { text: response.text } : {}),
    ...(response.calls.length ? { calls: response.calls } : {}),
    ...(response.reasoning ? { reasoning: response.reasoning } : {}),
  });
  if (response.calls.length === 0) return response.text ?? '';
  // The round advances in the same checkpoint write as the turn that opens it.
  state.round++;
  return undefined;
}

/** The delegations of the model's last turn, each call once (a call already delegated is skipped). */
function delegationsOfTurn(ctx: RunContext, incident: Incident): void {
  const { config, events } = ctx.deps;
  const { state } = ctx;
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
  events.emit({
    type: 'run.routed',
    runId: state.runId,
    incidentId: incident.id,
    data: { specialists: state.delegations.filter((d) => d.round === state.round).map((d) => d.agent), round: state.round },
  });
}

/** Delegate mode: one chat turn. Returns the answer when the model gives one. */
export async function think(ctx: RunContext, incident: Incident): Promise<string | undefined> {
  const { state } = ctx;
  if (state.messages.length === 0) {
    state.messages.push({ role: 'user', text: `A new incident needs an answer.\n\n${renderIncident(incident)}` });
  }
  const last = state.messages[state.messages.length - 1];
  if (last?.role === 'model') {
    // A model turn already saved (we crashed after saving it): act on it, don't ask again.
    if (!last.calls || last.calls.length === 0) return last.text ?? '';
  } else {
    const answer = await chatTurn(ctx, incident);
    if (answer !== undefined) return answer;
  }
  delegationsOfTurn(ctx, incident);
  return undefined;
}
