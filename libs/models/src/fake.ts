import { FINISH_TASK_TOOL, callFingerprint, sleep as pause } from '@bosun/contract';
import { anthropicError } from './anthropic.js';
import { geminiHttpError } from './gemini.js';
import { openAiError } from './openai-errors.js';
import { DELEGATE_TOOL_PREFIX, delegateToolName, extractFoldedCalls, extractIncident } from './prompt.js';
import { estimateTokens } from './resilient.js';
import { sdk } from './sdks.js';
import {
  ModelError,
  type GenerateOptions,
  type Message,
  type Model,
  type ModelRequest,
  type ModelResponse,
  type ToolCall,
} from './types.js';

/** A planned tool call of the fake model. */
export interface FakePlannedCall {
  tool: string;
  args: Record<string, unknown>;
}

/** Options of {@link FakeModel}: the config's routes and default plans. */
export interface FakeModelOptions {
  /** Incident reason → specialists (the coordinator's routes). */
  routes?: Record<string, readonly string[]>;
  /** Specialists for a reason no route names. */
  defaultRoute?: readonly string[];
  /** Specialist → the calls it makes when the incident gives no `payload.fake.calls`. */
  plans?: Record<string, readonly FakePlannedCall[]>;
  /** Simulated latency of every call, in ms (benchmarks). Default 0. */
  latencyMs?: number;
  /**
   * A context window, in tokens (estimated as the loops estimate them): a longer request is
   * answered with the context-length error of {@link FakeModelOptions.contextError}. No limit
   * when absent.
   */
  contextTokens?: number;
  /** Whose recorded context-length error an over-limit request gets (default `openai`). */
  contextError?: 'openai' | 'gemini' | 'anthropic';
}

/** What an incident's `payload.fake` may say (keyed by agent names from the incident: Maps, so `constructor` is just a name). */
interface FakeDirectives {
  route?: string[];
  calls?: Map<string, FakePlannedCall[]>;
  stall?: string[];
  fail?: string[];
  invalid?: string[];
  parallel?: string[];
  slowMs?: Map<string, number>;
  scripts?: Map<string, string[]>;
}

type Json = Record<string, unknown>;

/**
 * The offline model. It decides from the request alone — the incident in the first user
 * message, the tools offered and the history — never from a counter, so a run resumed in
 * another process gets the same decisions. Behaviour per mode is in docs/models.md.
 */
export class FakeModel implements Model {
  readonly name = 'fake';
  readonly contextTokens: number | undefined;
  private readonly contextError: 'openai' | 'gemini' | 'anthropic';
  private readonly routes: ReadonlyMap<string, readonly string[]>;
  private readonly defaultRoute: readonly string[];
  private readonly plans: ReadonlyMap<string, readonly FakePlannedCall[]>;

  constructor(options: FakeModelOptions = {}) {
    // Looked up by an incident's reason and an agent's name: Maps, never an object's own properties.
    this.routes = new Map(Object.entries(options.routes ?? {}));
    this.defaultRoute = options.defaultRoute ?? [];
    this.plans = new Map(Object.entries(options.plans ?? {}));
    this.latencyMs = options.latencyMs ?? 0;
    this.contextTokens = options.contextTokens;
    this.contextError = options.contextError ?? 'openai';
  }

  private readonly latencyMs: number;

  async generate(request: ModelRequest, options: GenerateOptions = {}): Promise<ModelResponse> {
    if (this.latencyMs > 0) await sleep(this.latencyMs, options.signal);
    if (this.contextTokens !== undefined) {
      const tokens = estimateTokens(request);
      if (tokens > this.contextTokens) throw await contextLengthError(this.contextError, tokens, this.contextTokens);
    }
    const firstUser = request.messages.find((m) => m.role === 'user');
    const incident = firstUser && firstUser.role === 'user' ? extractIncident(firstUser.text) : undefined;
    const directives = readDirectives(incident);
    const slow = directives.slowMs?.get(request.agent);
    if (slow) await sleep(slow, options.signal);
    if (directives.fail?.includes(request.agent)) {
      throw new ModelError(`fake model told to fail for ${request.agent} (payload.fake.fail)`, { retryable: false, status: 400 });
    }
    let response: ModelResponse;
    switch (request.mode) {
      case 'single':
        response = { text: JSON.stringify({ specialists: this.targets(incident, directives) }), calls: [] };
        break;
      case 'chat':
        response = this.chat(request, incident, directives);
        break;
      case 'task':
        response = this.task(request, incident, directives);
        break;
      case 'codeact':
        response = fakeCodeActTurn(request, incident, directives, this.plans.get(request.agent) ?? []);
        break;
    }
    return { ...response, usage: usageOf(request, response), model: 'fake' };
  }

  private targets(incident: Json | undefined, d: FakeDirectives): string[] {
    if (d.route) return d.route;
    const reason = typeof incident?.reason === 'string' ? incident.reason : '';
    return [...(this.routes.get(reason) ?? this.defaultRoute)];
  }

  private chat(request: ModelRequest, incident: Json | undefined, d: FakeDirectives): ModelResponse {
    const answered = responsesByName(request.messages);
    const offered = new Set(request.tools.map((t) => t.name));
    const pending = this.targets(incident, d)
      .map((agent) => ({ agent, tool: delegateToolName(agent) }))
      // An unknown target is still delegated, so the coordinator's error path is exercised.
      .filter(({ tool }) => !answered.has(tool) && (offered.has(tool) || offered.size > 0));
    if (pending.length > 0 && !isFinalRound(request)) {
      const step = modelTurns(request.messages);
      return {
        calls: pending.map(({ tool }, i) => ({
          id: `fake-${step}-${i}`,
          name: tool,
          args: {
            task: `Investigate incident ${textOf(incident?.id ?? '?')} (${textOf(incident?.reason ?? '?')}): ${textOf(incident?.summary ?? '')}`,
          },
        })),
      };
    }
    const agentOf = new Map(this.targets(incident, d).map((a) => [delegateToolName(a), a]));
    const lines = [...answered.entries()]
      .filter(([name]) => name.startsWith(DELEGATE_TOOL_PREFIX))
      .map(([name, r]) => `- ${agentOf.get(name) ?? name.slice(DELEGATE_TOOL_PREFIX.length)}: ${excerpt(r.output, 400)}`);
    return { text: `Summary for incident ${textOf(incident?.id ?? '?')}:\n${lines.join('\n') || '- no specialist reported'}`, calls: [] };
  }

  private task(request: ModelRequest, incident: Json | undefined, d: FakeDirectives): ModelResponse {
    const agent = request.agent;
    if (d.stall?.includes(agent)) {
      return {
        text: 'I could not reach a conclusion from the tools I have. Could someone on call tell me which cluster this service runs in?',
        calls: [],
      };
    }
    const step = modelTurns(request.messages);
    const offered = new Set(request.tools.map((t) => t.name));
    const onlyFinish = offered.size === 1 && offered.has(FINISH_TASK_TOOL);
    const plan = d.calls?.get(agent) ?? this.plans.get(agent) ?? [];
    const done = executedCalls(request.messages);
    if (!onlyFinish) {
      const next = plan.find((c) => !done.has(callFingerprint(c.tool, resolveArgs(c.args, incident))));
      // With tool routing, a planned tool that is not offered yet is loaded first.
      if (next && !offered.has(next.tool) && offered.has('load_tools')) {
        return { text: `Loading ${next.tool}.`, calls: [{ id: `fake-${step}-0`, name: 'load_tools', args: { tools: [next.tool] } }] };
      }
      if (next && d.parallel?.includes(agent)) {
        // Every remaining planned call in one turn.
        const rest = plan.filter((c) => !done.has(callFingerprint(c.tool, resolveArgs(c.args, incident))));
        return {
          text: `Proposing ${rest.length} calls.`,
          calls: rest.map((c, i) => ({ id: `fake-${step}-${i}`, name: c.tool, args: resolveArgs(c.args, incident) as Json })),
        };
      }
      if (next) return { calls: [{ id: `fake-${step}-0`, name: next.tool, args: resolveArgs(next.args, incident) as Json }] };
    }
    const finish = request.tools.find((t) => t.name === FINISH_TASK_TOOL);
    if (!finish) return { text: 'Nothing left to do.', calls: [] };
    const results = toolResults(request.messages);
    const alreadyRejected = request.messages.some(
      (m) => m.role === 'tool' && m.responses.some((r) => r.name === FINISH_TASK_TOOL && r.isError),
    );
    const args =
      d.invalid?.includes(agent) && !alreadyRejected
        ? { unexpected: true }
        : (fill(finish.parameters, 'output', results, incident) as Json);
    return { calls: [{ id: `fake-${step}-0`, name: FINISH_TASK_TOOL, args }] };
  }
}

/**
 * The error a provider answers a request too long for its window with: the body it sends (as
 * recorded from the live APIs, test/fixtures/README.md), mapped by that provider's own adapter
 * code, so the loops see exactly what they would see from the provider.
 */
async function contextLengthError(provider: 'openai' | 'gemini' | 'anthropic', tokens: number, limit: number): Promise<ModelError> {
  const failed = { apiKey: 'fake', timeoutMs: 60_000, aborted: false };
  switch (provider) {
    case 'openai': {
      const body = {
        error: {
          message: `This model's maximum context length is ${limit} tokens. However, your messages resulted in ${tokens} tokens. Please reduce the length of the messages.`,
          type: 'invalid_request_error',
          param: 'messages',
          code: 'context_length_exceeded',
        },
      };
      return openAiError((await sdk('openai')).APIError.generate(400, body, undefined, new Headers()), failed);
    }
    case 'gemini': {
      const message = `The input token count (${tokens}) exceeds the maximum number of tokens allowed (${limit}).`;
      return geminiHttpError(400, JSON.stringify({ error: { code: 400, message, status: 'INVALID_ARGUMENT' } }));
    }
    case 'anthropic': {
      const body = {
        type: 'error',
        error: { type: 'invalid_request_error', message: `prompt is too long: ${tokens} tokens > ${limit} maximum` },
        request_id: 'req_fake',
      };
      return anthropicError((await sdk('anthropic')).APIError.generate(400, body, undefined, new Headers()), failed);
    }
  }
}

/**
 * Fills `${path}` placeholders in planned arguments from the incident (`${labels.service}`,
 * `${id}`); a path the incident lacks is left as written, so the tool reports it.
 */
function resolveArgs(value: unknown, incident: Json | undefined): unknown {
  if (typeof value === 'string') {
    const whole = /^\$\{([A-Za-z0-9_.]+)\}$/.exec(value);
    const lookup = (path: string): unknown =>
      path.split('.').reduce<unknown>((o, k) => (o && typeof o === 'object' && Object.hasOwn(o, k) ? (o as Json)[k] : undefined), incident);
    if (whole) {
      const v = lookup(whole[1] ?? '');
      return v === undefined ? value : v;
    }
    return value.replace(/\$\{([A-Za-z0-9_.]+)\}/g, (m, path: string) => {
      const v = lookup(path);
      return v === undefined ? m : textOf(v);
    });
  }
  if (Array.isArray(value)) return value.map((v) => resolveArgs(v, incident));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value as Json).map(([k, v]) => [k, resolveArgs(v, incident)]));
  }
  return value;
}

/** Waits `ms`; an aborted call ends at once with an error, as a provider's would. */
async function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (!(await pause(ms, signal))) throw new ModelError('the model call was aborted', { retryable: false });
}

function readDirectives(incident: Json | undefined): FakeDirectives {
  const payload = incident?.payload;
  if (!payload || typeof payload !== 'object') return {};
  const fake = (payload as Json).fake;
  if (!fake || typeof fake !== 'object') return {};
  const f = fake as Json;
  const strings = (v: unknown) => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : undefined);
  const calls = new Map<string, FakePlannedCall[]>();
  if (f.calls && typeof f.calls === 'object') {
    for (const [agent, list] of Object.entries(f.calls as Json)) {
      if (!Array.isArray(list)) continue;
      calls.set(
        agent,
        list
          .filter((c): c is Json => !!c && typeof c === 'object' && typeof (c as Json).tool === 'string')
          .map((c) => ({ tool: c.tool as string, args: (c.args && typeof c.args === 'object' ? c.args : {}) as Json })),
      );
    }
  }
  const out: FakeDirectives = { calls, scripts: readScripts(f.scripts) };
  const route = strings(f.route);
  if (route) out.route = route;
  const stall = strings(f.stall);
  if (stall) out.stall = stall;
  const fail = strings(f.fail);
  if (fail) out.fail = fail;
  const invalid = strings(f.invalid);
  if (invalid) out.invalid = invalid;
  const parallel = strings(f.parallel);
  if (parallel) out.parallel = parallel;
  if (f.slowMs && typeof f.slowMs === 'object') {
    const slowMs = new Map(
      Object.entries(f.slowMs as Json).filter((e): e is [string, number] => typeof e[1] === 'number' && e[1] > 0 && e[1] <= 600_000),
    );
    if (slowMs.size > 0) out.slowMs = slowMs;
  }
  return out;
}

/** The coordinator tells the model to answer now by offering no tools. */
function isFinalRound(request: ModelRequest): boolean {
  return request.tools.length === 0;
}

function modelTurns(messages: readonly Message[]): number {
  return messages.filter((m) => m.role === 'model').length;
}

/** Calls that were made and answered, by tool and arguments (those folded into a summary turn too). */
function executedCalls(messages: readonly Message[]): Set<string> {
  const answered = new Set<string>();
  const folded = new Set<string>();
  for (const m of messages) if (m.role === 'user') for (const c of extractFoldedCalls(m.text)) folded.add(callFingerprint(c.tool, c.args));
  for (const m of messages) if (m.role === 'tool') for (const r of m.responses) answered.add(r.id);
  const out = new Set<string>();
  for (const m of messages) {
    if (m.role !== 'model') continue;
    for (const c of m.calls ?? []) if (answered.has(c.id)) out.add(callFingerprint(c.name, c.args));
  }
  for (const f of folded) out.add(f);
  return out;
}

function responsesByName(messages: readonly Message[]): Map<string, { output: unknown; isError: boolean }> {
  const out = new Map<string, { output: unknown; isError: boolean }>();
  for (const m of messages) {
    if (m.role !== 'tool') continue;
    for (const r of m.responses) out.set(r.name, { output: r.output, isError: r.isError ?? false });
  }
  return out;
}

function toolResults(messages: readonly Message[]): Result[] {
  const calls = new Map<string, ToolCall>();
  for (const m of messages) if (m.role === 'model') for (const c of m.calls ?? []) calls.set(c.id, c);
  const out: Result[] = [];
  for (const m of messages) {
    if (m.role === 'user') for (const c of extractFoldedCalls(m.text)) out.push({ tool: c.tool, output: c.result, isError: c.isError });
    if (m.role !== 'tool') continue;
    for (const r of m.responses) {
      if (r.name === FINISH_TASK_TOOL || r.name === 'load_tools') continue;
      out.push({ tool: calls.get(r.id)?.name ?? r.name, output: r.output, isError: r.isError ?? false });
    }
  }
  return out;
}

/**
 * A value of the incident as text: a string as it is, anything else as JSON (`String` would
 * write an object as `[object Object]`). The same as `String` for strings, numbers and booleans.
 */
function textOf(value: unknown): string {
  return typeof value === 'string' ? value : (JSON.stringify(value) ?? 'undefined');
}

function excerpt(value: unknown, max: number): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  const flat = (text ?? '').replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max)}…` : flat;
}

type Result = { tool: string; output: unknown; isError: boolean };

/**
 * A value for a JSON Schema that reports the tool results: required fields only; prose fields
 * summarise the results, arrays get one entry per result, enums their first value, numbers
 * their minimum. It reports what the tools said and nothing else.
 */
function fill(schema: unknown, name: string, results: Result[], incident: Json | undefined): unknown {
  const s = (schema && typeof schema === 'object' ? schema : {}) as Json;
  const type = Array.isArray(s.type) ? (s.type as string[]).find((t) => t !== 'null') : (s.type as string | undefined);
  if (s.const !== undefined) return s.const;
  if (Array.isArray(s.enum)) return s.enum[0];
  switch (type ?? (s.properties ? 'object' : 'string')) {
    case 'object': {
      const props = (s.properties ?? {}) as Record<string, unknown>;
      const required = new Set(Array.isArray(s.required) ? (s.required as string[]) : Object.keys(props));
      return Object.fromEntries(
        Object.entries(props)
          .filter(([k]) => required.has(k))
          .map(([k, v]) => [k, fill(v, k, results, incident)]),
      );
    }
    case 'array': {
      const min = typeof s.minItems === 'number' ? s.minItems : 0;
      const rows = results.map((r) => fill(s.items, name, [r], incident));
      while (rows.length < min) rows.push(fill(s.items, name, [], incident));
      return rows;
    }
    case 'number':
    case 'integer':
      return typeof s.minimum === 'number' ? s.minimum : 0;
    case 'boolean':
      return false;
    default: {
      let text: string;
      if (results.length === 0) text = `No tool results for incident ${textOf(incident?.id ?? '?')}.`;
      else if (results.length === 1 && /^(title|name|tool)$/i.test(name)) text = results[0]!.tool;
      else if (results.length === 1) text = `${results[0]!.isError ? '(error) ' : ''}${excerpt(results[0]!.output, 160)}`;
      else {
        text =
          `Checked ${results.length} tool results for incident ${textOf(incident?.id ?? '?')} ` +
          `(${[...new Set(results.map((r) => r.tool))].join(', ')})` +
          `${results.some((r) => r.isError) ? `; ${results.filter((r) => r.isError).length} returned errors` : ''}.`;
      }
      return typeof s.maxLength === 'number' ? text.slice(0, s.maxLength) : text;
    }
  }
}

/** The fake's usage: the same estimate the loops fit their requests with, the tool declarations included (they are billed as input). */
function usageOf(request: ModelRequest, response: ModelResponse) {
  const inputTokens = estimateTokens(request);
  const outputTokens = Math.ceil(((response.text ?? '') + JSON.stringify(response.calls)).length / 4);
  return { inputTokens, outputTokens, totalTokens: inputTokens + outputTokens };
}

// ---- CodeAct ------------------------------------------------------------------------------

/** `payload.fake.scripts`: agent → the script of each turn (a string is one turn). Maps, so any agent name is just a key. */
function readScripts(value: unknown): Map<string, string[]> | undefined {
  if (!value || typeof value !== 'object') return undefined;
  const out = new Map<string, string[]>();
  for (const [agent, v] of Object.entries(value as Json)) {
    if (typeof v === 'string') out.set(agent, [v]);
    else if (Array.isArray(v))
      out.set(
        agent,
        v.filter((x): x is string => typeof x === 'string'),
      );
  }
  return out;
}

function fenced(script: string, text: string): string {
  return `${text}\n\n\`\`\`js\n${script}\n\`\`\``;
}

/**
 * The fake model's CodeAct turn: the incident's script for this turn (`payload.fake.scripts`);
 * else its default plan (`payload.fake.calls`, then the configured plan) chained in one script
 * that fills its `final_result` from the output schema and the tools' results; a later turn
 * (after a script error or a correction) returns a `final_result` without calling tools again.
 * Decided from the request alone, like every fake turn.
 */
function fakeCodeActTurn(
  request: ModelRequest,
  incident: Json | undefined,
  d: FakeDirectives,
  configured: readonly FakePlannedCall[],
): ModelResponse {
  const agent = request.agent;
  if (d.stall?.includes(agent))
    return { text: 'I cannot write a script for this without knowing which cluster the service runs in.', calls: [] };
  const turn = modelTurns(request.messages);
  const scripts = d.scripts?.get(agent);
  if (scripts) {
    const script = scripts[turn];
    return script === undefined
      ? { text: 'I have no further script to run.', calls: [] }
      : { text: fenced(script, `Turn ${turn + 1}.`), calls: [] };
  }
  const plan = d.calls?.get(agent) ?? configured;
  const results: Result[] = plan.map((c) => ({ tool: c.tool, output: '', isError: false }));
  const output = JSON.stringify(fill(request.outputSchema ?? {}, 'output', results, incident));
  if (turn > 0) return { text: fenced(`return { final_result: ${output} };`, 'Reporting.'), calls: [] };
  const lines = plan.map(
    (c) =>
      `results.push({ tool: ${JSON.stringify(c.tool)}, output: call_tool(${JSON.stringify(c.tool)}, ${JSON.stringify(resolveArgs(c.args, incident))}), isError: false });`,
  );
  // The report is filled inside the script from what the tools returned there, as a model's
  // script would: by the same filler as the task loop's answer, run in the sandbox.
  const schema = JSON.stringify(request.outputSchema ?? {});
  const script = [
    'const results = [];',
    ...lines,
    `console.log("checked", results.length, "tools");`,
    `${textOf.toString()}\n${excerpt.toString()}\n${fill.toString()}`,
    `return { final_result: fill(${schema}, "output", results, ${JSON.stringify({ id: incident?.id ?? '?' })}) };`,
  ].join('\n');
  return { text: fenced(script, `Checking ${plan.length} tools for incident ${textOf(incident?.id ?? '?')} in one script.`), calls: [] };
}
