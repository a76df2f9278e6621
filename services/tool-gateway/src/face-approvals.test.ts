import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { Approval, ApprovalRequest, CatalogTool } from '@bosun/contract';
import { createLogger, loadClusterConfig, type ClusterConfig } from '@bosun/config';

import { FaceApprovals } from './face-approvals.js';

// The approvals the gateway's MCP face requests carry the tool's rule of several people, as the
// specialists' loops do (issue 23 item 4): the store then counts the votes.

const DEMO = fileURLToPath(new URL('../../../infra/demo/bosun.yaml', import.meta.url));

function tool(remoteName: string): CatalogTool {
  return {
    name: `demo__${remoteName}`,
    server: 'demo',
    remoteName,
    description: remoteName,
    inputSchema: { type: 'object' },
    annotations: {},
  };
}

/** The face's approvals over the demo config, rollback_deployment under a rule of two; the requests it makes. */
function faceApprovals() {
  const base = loadClusterConfig(DEMO, { resolveServers: false });
  const demo = base.mcpServers.demo!;
  const config: ClusterConfig = {
    ...base,
    mcpServers: {
      ...base.mcpServers,
      demo: { ...demo, tools: { ...demo.tools, rollback_deployment: { state: 'ask', approvals: { required: 2, distinctFrom: 'none' } } } },
    },
  };
  const requests: ApprovalRequest[] = [];
  const approvals = new FaceApprovals({
    config,
    caller: { tools: ['demo__*'], mode: 'read-write', approvalTimeoutMs: 60_000 },
    approvals: {
      request: (r) => {
        requests.push(r);
        return Promise.resolve({ ...r, status: 'pending' } as Approval);
      },
      get: () => Promise.resolve(null),
      decide: () => Promise.reject(new Error('unused')),
    },
    events: { emit: () => undefined, flush: () => Promise.resolve() },
    log: createLogger({ service: 'face-approvals-test', level: 'silent' }),
    pollMs: 50,
    progressMs: 1_000,
  });
  return { approvals, requests };
}

describe('approvals through the MCP face', () => {
  it("store the tool's rule of several people; a tool of one person's approval stores none, as before rules", async () => {
    const { approvals, requests } = faceApprovals();
    await approvals.request({ tool: tool('rollback_deployment'), args: { toVersion: 'v41' }, meta: {}, wait: false });
    await approvals.request({ tool: tool('restart_pod'), args: { pod: 'p' }, meta: {}, wait: false });
    expect(requests.map((r) => r.rule)).toEqual([{ required: 2, distinctFrom: 'none' }, undefined]);
    expect(requests[0]).toMatchObject({ runId: 'mcp', agent: 'mcp-client', calls: [{ tool: 'demo__rollback_deployment' }] });
    expect(requests[0]).not.toHaveProperty('requester');
  });
});
