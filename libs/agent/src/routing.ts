import type { CatalogTool } from '@bosun/contract';
import { toolAllowed } from '@bosun/policy';
import type { ToolDeclaration } from '@bosun/models';

/** The tool the model loads tool groups with, when routing is on. */
export const LOAD_TOOLS = 'load_tools';

/** Routing settings of a specialist. */
export interface RoutingSpec {
  enabled: boolean;
  /** Group → tool patterns; empty: one group per MCP server. */
  groups: Record<string, readonly string[]>;
  alwaysOn: readonly string[];
}

/** Routing statistics, kept in the task's checkpoint and reported in its events. */
export interface RoutingState {
  loaded: string[];
  groupsOffered: string[];
  groupsLoaded: string[];
  reloads: number;
  nudged: boolean;
}

/** The groups and their tools, from the config or one per server. */
export function routingGroups(spec: RoutingSpec, tools: readonly CatalogTool[]): Map<string, string[]> {
  const groups = new Map<string, string[]>();
  const entries =
    Object.keys(spec.groups).length > 0
      ? Object.entries(spec.groups)
      : [...new Set(tools.map((t) => t.server))].map((s) => [s, [`${s}__*`]] as const);
  for (const [name, patterns] of entries) {
    const members = tools.filter((t) => toolAllowed(patterns, t.name)).map((t) => t.name);
    if (members.length > 0) groups.set(name, members);
  }
  return groups;
}

/** The initial routing state: the always-on groups loaded. */
export function initialRouting(spec: RoutingSpec, groups: Map<string, string[]>): RoutingState {
  const on = spec.alwaysOn.filter((g) => groups.has(g));
  return {
    loaded: on.flatMap((g) => groups.get(g) ?? []),
    groupsOffered: [...groups.keys()],
    groupsLoaded: [...on],
    reloads: 0,
    nudged: false,
  };
}

/** The declaration of `load_tools`, naming every group and its tools. */
export function loadToolsDeclaration(groups: Map<string, string[]>, tools: readonly CatalogTool[]): ToolDeclaration {
  const describe = (name: string) => {
    const t = tools.find((x) => x.name === name);
    const first = (t?.description ?? '').split('\n')[0]?.slice(0, 120) ?? '';
    return `${name}${first ? ` (${first})` : ''}`;
  };
  const lines = [...groups.entries()].map(([g, members]) => `- ${g}: ${members.map(describe).join('; ')}`);
  return {
    name: LOAD_TOOLS,
    description: `Load tools before you use them: whole groups, or single tools by name. Groups:\n${lines.join('\n')}`,
    parameters: {
      type: 'object',
      properties: {
        groups: { type: 'array', items: { type: 'string', enum: [...groups.keys()] }, description: 'Groups to load.' },
        tools: { type: 'array', items: { type: 'string' }, description: 'Single tools to load, by name.' },
      },
    },
  };
}

/** Applies a `load_tools` call to the routing state; returns what to tell the model. */
export function applyLoad(
  state: RoutingState,
  groups: Map<string, string[]>,
  allowed: readonly CatalogTool[],
  args: Record<string, unknown>,
) {
  const wantGroups = Array.isArray(args.groups) ? args.groups.filter((g): g is string => typeof g === 'string') : [];
  const wantTools = Array.isArray(args.tools) ? args.tools.filter((t): t is string => typeof t === 'string') : [];
  const loaded: string[] = [];
  const unknown: string[] = [];
  for (const g of wantGroups) {
    const members = groups.get(g);
    if (!members) {
      unknown.push(g);
      continue;
    }
    if (state.groupsLoaded.includes(g)) state.reloads++;
    else state.groupsLoaded.push(g);
    for (const m of members) if (!state.loaded.includes(m)) loaded.push(m);
  }
  for (const t of wantTools) {
    if (!allowed.some((a) => a.name === t)) unknown.push(t);
    else if (state.loaded.includes(t)) state.reloads++;
    else if (!loaded.includes(t)) loaded.push(t);
  }
  state.loaded.push(...loaded);
  return { loaded, unknown, available: state.loaded.slice() };
}
