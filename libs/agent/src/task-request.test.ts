import { describe, expect, it } from 'vitest';
import {
  FINISH_TASK_TOOL,
  Incident,
  STALL_MARKER,
  parseWith,
  taskIdFor,
  type Catalog,
  type CatalogTool,
  type DeadLetter,
  type TaskJob,
  type ToolCallJob,
  type ToolCallResult,
} from '@bosun/contract';
import { createLogger, parseClusterConfig } from '@bosun/config';
import { FakeModel, OpenAiModel, type Model, type ModelRequest, type ModelResponse } from '@bosun/models';
import { MemoryCheckpointStore, MemoryEventSink, type DeadLetterInput, type ToolClient } from '@bosun/transport';
import { completion, startOpenAiServer } from '../../../test/helpers/openai-server.js';

import { DEFAULT_TASK_INSTRUCTION, RetryableTaskError, runTask, type TaskAgentDeps, type TaskAgentSpec } from './task.js';
import { FINISH_TASK_DESCRIPTION, specialistPolicy } from './task-tools.js';

/**
 * What the task loop sends to the model, pinned: the stable prefix a provider caches (system and
 * tool definitions first, byte-identical from turn to turn, also after a resume from the
 * checkpoint), and no tool the specialist cannot call. The bench's scenario 12 measures the
 * same on a real cluster (docs/scaling.md, "Token cost per incident").
 */

const REPORT = {
  type: 'object',
  required: ['summary'],
  properties: { summary: { type: 'string' } },
};
const RUN_ID = 'r0123456789abcdef0123';

/** A catalog tool as the MCP SDK lists it: with the `$schema` it puts on every input schema. */
function tool(name: string, readOnly: boolean): CatalogTool {
  const [server, remoteName] = name.split('__') as [string, string];
  return {
    name,
    server,
    remoteName,
    description: `${remoteName} of a service`,
    inputSchema: {
      type: 'object',
      properties: { service: { type: 'string', minLength: 1 } },
      required: ['service'],
      $schema: 'http://json-schema.org/draft-07/schema#',
    },
    annotations: { readOnlyHint: readOnly },
  };
}

const CATALOG_TOOLS = [
  tool('demo__get_pods', true),
  tool('demo__get_logs', true),
  tool('demo__restart_pod', false),
  tool('demo__drop_database', false),
  tool('admin__delete_namespace', false),
];

/** Answers every call; each `catalog()` is a fresh object parsed from the same text, as a new process reads it from Redis. */
class Tools implements ToolClient {
  private readonly text = JSON.stringify({ v: 1, updatedAt: '2025-01-01T00:00:00.000Z', tools: CATALOG_TOOLS, unavailable: {} });
  async catalog(): Promise<Catalog> {
    return JSON.parse(this.text) as Catalog;
  }
  async call(call: ToolCallJob): Promise<ToolCallResult> {
    return { v: 1, key: call.key, tool: call.tool, status: 'ok', isError: false, text: `${call.tool}: ok`, durationMs: 1 };
  }
}

/** Records every request (deep-copied). */
class Recording implements Model {
  readonly name = 'fake';
  readonly requests: ModelRequest[] = [];
  constructor(private readonly inner: Model) {}
  async generate(request: ModelRequest): Promise<ModelResponse> {
    this.requests.push(structuredClone(request));
    return this.inner.generate(request);
  }
}

function job(agent: string): TaskJob {
  const incident = parseWith(
    Incident,
    { id: 'inc-7', source: 'test', reason: 'PodCrashLooping', summary: 'checkout restarts', labels: { service: 'checkout' } },
    'incident',
  );
  return { v: 1, runId: RUN_ID, incidentId: incident.id, taskId: taskIdFor(RUN_ID, 0, agent), agent, task: 'Investigate.', incident };
}

function deps(model: Model, checkpoints: MemoryCheckpointStore, policy?: TaskAgentDeps['policy']): TaskAgentDeps {
  return {
    model,
    tools: new Tools(),
    checkpoints,
    events: new MemoryEventSink(),
    deadLetters: {
      add: async (input: DeadLetterInput): Promise<DeadLetter> => ({ v: 1, marker: STALL_MARKER, at: new Date(0).toISOString(), ...input }),
    },
    log: createLogger({ service: 't', level: 'silent' }),
    ...(policy ? { policy } : {}),
  };
}

const PLAN = [
  { tool: 'demo__get_pods', args: { service: 'checkout' } },
  { tool: 'demo__get_logs', args: { service: 'checkout' } },
];
const spec = (name = 'kubernetes'): TaskAgentSpec => ({
  name,
  tools: ['demo__*'],
  outputSchema: REPORT,
  maxToolRounds: 8,
  maxInvalidOutputs: 2,
});

describe('what the task loop sends to the model', () => {
  it('sends each request as a byte-identical prefix of the next on the wire (OpenAI shape), system and tools first, across a resume', async () => {
    // The plan: get_pods, get_logs, finish_task; the third request fails once with a 503, so the
    // job is retried and the task resumes from its checkpoint with a fresh catalog object, as in
    // another process.
    const plan: [string, unknown][] = [
      ['demo__get_pods', { service: 'checkout' }],
      ['demo__get_logs', { service: 'checkout' }],
      [FINISH_TASK_TOOL, { summary: 'checkout pods crash-loop' }],
    ];
    let failed = false;
    const server = await startOpenAiServer((req) => {
      const done = req.body.messages.filter((m) => m.role === 'tool').length;
      if (done === 2 && !failed) {
        failed = true;
        return { status: 503, body: { error: { message: 'overloaded', type: 'server_error' } } };
      }
      return completion({ calls: [plan[done]!] });
    });
    try {
      const model = new OpenAiModel({ apiKey: 'sk-test', model: 'gpt-4.1-mini', baseUrl: server.baseUrl });
      const checkpoints = new MemoryCheckpointStore();
      await expect(runTask(job('kubernetes'), spec(), deps(model, checkpoints), 1)).rejects.toBeInstanceOf(RetryableTaskError);
      const result = await runTask(job('kubernetes'), spec(), deps(model, checkpoints), 2);
      expect(result.status).toBe('completed');
      // Tools first (providers render them ahead of the conversation), then each message as sent.
      const sent = server.requests
        .map((r) => r.body)
        .filter((b, i) => i !== 2) // the 503's request is sent again, unchanged, as the 4th
        .map((b) => [JSON.stringify(b.tools), ...b.messages.map((m) => JSON.stringify(m))].join('\n'));
      expect(JSON.stringify(server.requests[3]?.body)).toBe(JSON.stringify(server.requests[2]?.body));
      expect(sent).toHaveLength(3);
      for (let i = 1; i < sent.length; i++) {
        // Everything the turn before sent, to the byte, then the new turns.
        expect(sent[i]!.startsWith(sent[i - 1]!), `request ${i + 1} does not start with request ${i}`).toBe(true);
      }
      expect(new Set(server.requests.map((r) => JSON.stringify([r.body.tools, r.body.messages[0]]))).size).toBe(1);
      expect(server.requests[0]?.body.messages[0]).toEqual({ role: 'system', content: DEFAULT_TASK_INSTRUCTION });
    } finally {
      await server.close();
    }
  });

  it('sends no $schema and the incident compact, and says when to call finish_task once: in its description, not again in the instruction', async () => {
    const model = new Recording(new FakeModel({ plans: { kubernetes: PLAN } }));
    await runTask(job('kubernetes'), spec(), deps(model, new MemoryCheckpointStore()), 1);
    const first = model.requests[0]!;
    expect(JSON.stringify(first.tools)).not.toContain('$schema');
    expect(first.tools.find((t) => t.name === FINISH_TASK_TOOL)?.description).toBe(FINISH_TASK_DESCRIPTION);
    expect(first.system).toBe(DEFAULT_TASK_INSTRUCTION);
    expect(first.system).not.toContain(FINISH_TASK_TOOL);
    // The incident compact, as tool results are: no indentation in every request of the task.
    expect(first.messages[0]).toEqual({
      role: 'user',
      text: `Investigate.\n\nIncident:\n\`\`\`json\n${JSON.stringify(job('kubernetes').incident)}\n\`\`\``,
    });
    // The schema is otherwise as the server wrote it.
    expect(first.tools[0]?.parameters).toEqual({
      type: 'object',
      properties: { service: { type: 'string', minLength: 1 } },
      required: ['service'],
    });
  });

  it("offers no tool the specialist cannot call: not `off` ones, not another server's, no mutating one when read-only", async () => {
    const config = parseClusterConfig(
      {
        specialists: {
          kubernetes: { description: 'k8s', tools: ['demo__*'], outputSchema: REPORT },
          database: { description: 'db', tools: ['demo__*'], mode: 'read-only', outputSchema: REPORT },
        },
        mcpServers: {
          demo: { transport: 'stdio', command: 'node', tools: { drop_database: 'off', restart_pod: 'ask' } },
          admin: { transport: 'stdio', command: 'node' },
        },
      },
      { file: 'bosun.yaml', env: {} },
    );
    const offered = async (agent: string) => {
      const model = new Recording(new FakeModel({ plans: { [agent]: [] } }));
      await runTask(job(agent), spec(agent), deps(model, new MemoryCheckpointStore(), specialistPolicy(config, agent)), 1);
      return model.requests.map((r) => r.tools.map((t) => t.name));
    };
    expect(await offered('kubernetes')).toEqual([['demo__get_pods', 'demo__get_logs', 'demo__restart_pod', FINISH_TASK_TOOL]]);
    expect(await offered('database')).toEqual([['demo__get_pods', 'demo__get_logs', FINISH_TASK_TOOL]]);
    expect(() => specialistPolicy(config, 'nobody')).toThrow(/no specialist "nobody"/);
  });
});
