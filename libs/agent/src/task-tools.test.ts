import { describe, expect, it } from 'vitest';
import type { Catalog, CatalogTool, ToolCallResult } from '@bosun/contract';
import type { ToolClient } from '@bosun/transport';
import { ToolView, defaultPolicy } from './task-tools.js';
import type { TaskAgentSpec } from './task-types.js';

// The tool view is shared by the tasks of one specialist while the catalog object is the same
// (memory with thousands of tasks in flight), and rebuilt for another catalog, spec or policy.

const REPORT = { type: 'object', properties: { summary: { type: 'string' } } };

function tool(name: string): CatalogTool {
  const [server, remoteName] = name.split('__') as [string, string];
  return {
    name,
    server,
    remoteName,
    description: remoteName,
    inputSchema: { type: 'object', properties: {} },
    annotations: { readOnlyHint: true },
  };
}

function catalogOf(names: string[]): Catalog {
  return { v: 1, updatedAt: '2025-01-01T00:00:00.000Z', tools: names.map(tool), unavailable: {} };
}

/** A tool client that returns the catalog it is given, as the same object every time. */
function client(catalog: { current: Catalog }): ToolClient {
  return {
    catalog: async () => catalog.current,
    call: async (): Promise<ToolCallResult> => {
      throw new Error('no calls here');
    },
  };
}

function spec(over: Partial<TaskAgentSpec> = {}): TaskAgentSpec {
  return { name: 'ops', tools: ['demo__*'], outputSchema: REPORT, maxToolRounds: 10, maxInvalidOutputs: 1, ...over };
}

describe('ToolView.load', () => {
  it('returns one view, and one declarations array, for the same catalog, spec and policy', async () => {
    const catalog = { current: catalogOf(['demo__a', 'demo__b', 'other__c']) };
    const s = spec();
    const tools = client(catalog);
    const [a, b] = await Promise.all([ToolView.load(s, { tools }), ToolView.load(s, { tools })]);
    expect(a).toBe(b);
    expect(a.allowed.map((t) => t.name)).toEqual(['demo__a', 'demo__b']);
    const decls = a.declarations(undefined);
    expect(decls.map((d) => d.name)).toEqual(['demo__a', 'demo__b', 'finish_task']);
    expect(b.declarations(undefined)).toBe(decls);
  });

  it('builds a new view for another catalog object, another spec object or another policy', async () => {
    const catalog = { current: catalogOf(['demo__a']) };
    const s = spec();
    const tools = client(catalog);
    const first = await ToolView.load(s, { tools });
    catalog.current = catalogOf(['demo__a', 'demo__b']);
    const next = await ToolView.load(s, { tools });
    expect(next).not.toBe(first);
    expect(next.allowed.map((t) => t.name)).toEqual(['demo__a', 'demo__b']);
    const other = spec({ tools: ['demo__b'] });
    expect((await ToolView.load(other, { tools })).allowed.map((t) => t.name)).toEqual(['demo__b']);
    const policy = { ...defaultPolicy(s), offered: (all: readonly CatalogTool[]) => all.filter((t) => t.name === 'demo__a') };
    const withPolicy = await ToolView.load(s, { tools, policy });
    expect(withPolicy).not.toBe(next);
    expect(withPolicy.allowed.map((t) => t.name)).toEqual(['demo__a']);
    expect(await ToolView.load(s, { tools, policy })).toBe(withPolicy);
  });
});
