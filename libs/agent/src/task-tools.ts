import { FINISH_TASK_TOOL, type Catalog, type CatalogTool, type TaskCheckpointData } from '@bosun/contract';
import type { ClusterConfig } from '@bosun/config';
import { approvalRuleFor, approvalTimeoutFor, isReadOnlyTool, offeredTools, specialistCaller, toolAllowed, toolState } from '@bosun/policy';
import type { ToolCall, ToolDeclaration } from '@bosun/models';
import { applyLoad, initialRouting, loadToolsDeclaration, routingGroups, type RoutingState } from './routing.js';
import type { TaskAgentDeps, TaskAgentSpec, TaskPolicy } from './task-types.js';

type Routing = TaskCheckpointData['routing'];

/** The routing statistics reported in events and the completed result. */
export interface RoutingStats {
  groupsOffered: string[];
  groupsLoaded: string[];
  reloads: number;
  skipped: string[];
  nudged: boolean;
}

/** The default policy: the spec's patterns and mode; every tool runs without approval. */
export function defaultPolicy(spec: TaskAgentSpec): TaskPolicy {
  return {
    offered: (tools) => tools.filter((t) => toolAllowed(spec.tools, t.name) && (spec.mode !== 'read-only' || isReadOnlyTool(t))),
    stateOf: () => 'allow',
    approvalTimeoutMs: () => spec.approvalTimeoutMs ?? 300_000,
  };
}

/**
 * The policy of a configured specialist, as its process applies it: the tools its patterns allow,
 * minus `off` ones, and only read-only ones in `read-only` mode (`offeredTools`); each tool's
 * state and approval timeout from the config. The model is never shown a tool the gateway would
 * refuse to run for this agent. Throws for a name the config does not know.
 */
export function specialistPolicy(config: ClusterConfig, name: string): TaskPolicy {
  const caller = specialistCaller(config, name);
  if (!caller) throw new TypeError(`specialistPolicy: no specialist "${name}" in the config`);
  return {
    offered: (tools) => offeredTools(config, caller, tools),
    stateOf: (tool) => toolState(config, tool),
    approvalTimeoutMs: (tool) => approvalTimeoutFor(config, caller, tool),
    approvalRule: (tool) => approvalRuleFor(config, tool),
  };
}

/**
 * A tool's input schema as the model is shown it: without the root `$schema` (the JSON Schema
 * dialect URI the MCP SDK puts on every tool, about 50 bytes each, which tells a model nothing).
 * Everything else is kept as the server wrote it, in its order, so the declaration is
 * byte-identical from turn to turn and from task to task.
 */
export function modelParameters(schema: Record<string, unknown>): Record<string, unknown> {
  if (!Object.hasOwn(schema, '$schema')) return schema;
  const { $schema: _dialect, ...rest } = schema;
  return rest;
}

function declare(tool: CatalogTool): ToolDeclaration {
  return { name: tool.name, description: tool.description, parameters: modelParameters(tool.inputSchema) };
}

/** `finish_task`'s description: the one place that says when to call it (the default instruction does not repeat it). */
export const FINISH_TASK_DESCRIPTION = 'Report the result of this task. Call it exactly once, when you are done or cannot get further.';

function finishDeclaration(outputSchema: Record<string, unknown>): ToolDeclaration {
  return { name: FINISH_TASK_TOOL, description: FINISH_TASK_DESCRIPTION, parameters: modelParameters(outputSchema) };
}

/** The key of the default policy (no `deps.policy`) in {@link views}. */
const DEFAULT_POLICY = {};

/**
 * Views already built, by catalog, policy and spec object. A view never changes once built, so the
 * tasks of one specialist share it while the catalog is the same object (see `ToolClient.catalog`):
 * thousands of tasks in flight hold one copy of the offered tools and their declarations.
 */
const views = new WeakMap<Catalog, WeakMap<object, WeakMap<TaskAgentSpec, ToolView>>>();

/**
 * A task's view of the tool catalog under its policy: the tools it is offered, by name, their
 * routing groups (when routing is on), and what the model is shown of them.
 */
export class ToolView {
  readonly policy: TaskPolicy;
  /** The catalog tools this agent is offered. */
  readonly allowed: readonly CatalogTool[];
  readonly byName: ReadonlyMap<string, CatalogTool>;
  /** Routing groups → tool names; undefined when routing is off. */
  readonly groups: Map<string, string[]> | undefined;
  /** `finish_task`, whose parameters are the output schema. */
  readonly finishDecl: ToolDeclaration;
  private readonly spec: TaskAgentSpec;
  /** Every tool and `finish_task`: what is offered without routing, built once (never mutate it). */
  private everyTool: ToolDeclaration[] | undefined;

  private constructor(spec: TaskAgentSpec, policy: TaskPolicy, allowed: CatalogTool[]) {
    this.spec = spec;
    this.policy = policy;
    this.allowed = allowed;
    this.byName = new Map(allowed.map((t) => [t.name, t]));
    this.groups = spec.routing?.enabled ? routingGroups(spec.routing, allowed) : undefined;
    this.finishDecl = finishDeclaration(spec.outputSchema);
  }

  /**
   * Reads the catalog and applies the policy (the deps' policy, or the spec's patterns and mode);
   * the view of the same catalog, policy and spec objects is reused.
   */
  static async load(spec: TaskAgentSpec, deps: Pick<TaskAgentDeps, 'tools' | 'policy'>): Promise<ToolView> {
    const catalog = await deps.tools.catalog();
    let byPolicy = views.get(catalog);
    if (!byPolicy) views.set(catalog, (byPolicy = new WeakMap()));
    const policyKey = deps.policy ?? DEFAULT_POLICY;
    let bySpec = byPolicy.get(policyKey);
    if (!bySpec) byPolicy.set(policyKey, (bySpec = new WeakMap()));
    let view = bySpec.get(spec);
    if (!view) {
      const policy = deps.policy ?? defaultPolicy(spec);
      view = new ToolView(spec, policy, policy.offered(catalog.tools));
      bySpec.set(spec, view);
    }
    return view;
  }

  /** The routing state a task starts with: undefined when routing is off or has no group. */
  initialRouting(): RoutingState | undefined {
    const { routing } = this.spec;
    return routing && this.groups && this.groups.size > 0 ? initialRouting(routing, this.groups) : undefined;
  }

  /** What the model is offered: with routing, the groups and what it has loaded; without, every tool. */
  declarations(routing: Routing): ToolDeclaration[] {
    if (!this.groups || !routing) return (this.everyTool ??= [...this.allowed.map(declare), this.finishDecl]);
    const loadedNow = new Set(routing.loaded);
    return [
      ...this.allowed.filter((t) => loadedNow.has(t.name)).map(declare),
      loadToolsDeclaration(this.groups, this.allowed),
      this.finishDecl,
    ];
  }

  /** Routing statistics; undefined without routing. */
  routingStats(routing: Routing): RoutingStats | undefined {
    if (!routing) return undefined;
    return {
      groupsOffered: routing.groupsOffered,
      groupsLoaded: routing.groupsLoaded,
      reloads: routing.reloads,
      // A group is skipped when none of its tools was ever loaded (as a group or one by one).
      skipped: routing.groupsOffered.filter((g) => !(this.groups?.get(g) ?? []).some((t) => routing.loaded.includes(t))),
      nudged: routing.nudged,
    };
  }

  /** Routing's one nudge is due: the model tries to answer before loading anything it could load. */
  needsNudge(routing: Routing): routing is NonNullable<Routing> {
    return !!routing && !routing.nudged && routing.groupsLoaded.length === 0 && routing.loaded.length === 0;
  }

  /** Whether routing is under way: `load_tools` is offered, and only loaded tools may be called. */
  routes(routing: Routing): routing is NonNullable<Routing> {
    return !!this.groups && !!routing;
  }

  /** Applies a `load_tools` call to the routing state; returns what to tell the model. */
  load(routing: NonNullable<Routing>, args: Record<string, unknown>): ReturnType<typeof applyLoad> {
    return applyLoad(routing, this.groups ?? new Map<string, string[]>(), this.allowed, args);
  }

  /** The offered tools that the calls of a turn use and that need an operator's approval (`ask`), one per call. */
  askingTools(calls: readonly ToolCall[]): CatalogTool[] {
    return calls.flatMap((c) => {
      const tool = this.byName.get(c.name);
      return tool && this.policy.stateOf(tool) === 'ask' ? [tool] : [];
    });
  }
}
