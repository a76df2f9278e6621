/**
 * The standard incident on LangGraph.js: a `StateGraph` over `MessagesAnnotation` with an agent
 * node (a fake chat model, a `BaseChatModel` with the plan of Bosun's fake model) and LangGraph's
 * prebuilt `ToolNode` over the demo MCP server's tools from `@langchain/mcp-adapters` (one
 * `MultiServerMCPClient`, one stdio session), checkpointed in PostgreSQL by
 * `@langchain/langgraph-checkpoint-postgres`'s `PostgresSaver`, one thread per incident.
 *
 * The packages are loaded from bench/peers (see load.ts); the types below name only what the
 * bench uses of them.
 */
import { join } from 'node:path';
import { peerModule } from './load.js';
import { fakeDecision, parseIncidentText, type PeerIncident, type PeerOutcome } from './plan.js';

/** LangGraph's three durability modes (`invoke(…, { durability })`; "async" is the default). */
export type Durability = 'sync' | 'async' | 'exit';

interface LcMessage {
  readonly type: string;
  content: unknown;
  name?: string;
}

interface ThreadConfig {
  configurable: { thread_id: string };
  durability?: Durability;
}

interface CompiledGraph {
  invoke(input: { messages: LcMessage[] } | null, config: ThreadConfig): Promise<{ messages: LcMessage[] }>;
  getState(config: ThreadConfig): Promise<{ next: string[]; values: { messages?: LcMessage[] } }>;
}

interface GraphBuilder {
  addNode(name: string, node: unknown): GraphBuilder;
  addEdge(from: string, to: string): GraphBuilder;
  addConditionalEdges(from: string, condition: unknown, targets: string[]): GraphBuilder;
  compile(options: { checkpointer: unknown }): CompiledGraph;
}

interface LangGraphModule {
  StateGraph: new (state: unknown) => GraphBuilder;
  MessagesAnnotation: unknown;
  START: string;
  END: string;
}

interface PrebuiltModule {
  ToolNode: new (tools: unknown[]) => unknown;
  toolsCondition: unknown;
}

interface ToolCall {
  id: string;
  name: string;
  args: Record<string, unknown>;
  type: 'tool_call';
}

interface MessagesModule {
  AIMessage: new (fields: { content: string; tool_calls?: ToolCall[] }) => LcMessage;
  HumanMessage: new (content: string) => LcMessage;
}

/** The part of `BaseChatModel` the fake overrides. */
interface ChatModelBase {
  invoke(messages: LcMessage[]): Promise<LcMessage>;
}

interface ChatModelsModule {
  BaseChatModel: abstract new (fields: Record<string, unknown>) => ChatModelBase;
}

/** A `pg.Pool`, as the bench uses it. */
export interface PgPool {
  query<R = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<{ rows: R[] }>;
  end(): Promise<void>;
}

interface PgModule {
  Pool: new (config: {
    connectionString: string;
    application_name: string;
    max?: number;
    idleTimeoutMillis?: number;
    options?: string;
  }) => PgPool;
}

interface PostgresSaverModule {
  PostgresSaver: new (pool: PgPool, serde: undefined, options: { schema: string }) => { setup(): Promise<void> };
}

interface McpTool {
  name: string;
}

interface McpAdaptersModule {
  MultiServerMCPClient: new (config: {
    mcpServers: Record<string, { transport: 'stdio'; command: string; args: string[]; env: Record<string, string>; stderr: 'ignore' }>;
    prefixToolNameWithServerName: boolean;
    useStandardContentBlocks: boolean;
  }) => { getTools(): Promise<McpTool[]>; close(): Promise<void> };
}

/** Options of {@link startLangGraph}. */
export interface LangGraphOptions {
  root: string;
  /** PostgreSQL URL (trust auth on the loopback). */
  pgUrl: string;
  /** The schema the checkpointer's tables go into (created by `setup()`; dropped by the caller). */
  schema: string;
  /** `application_name` of the pool's connections: how the bench finds their backends. */
  appName: string;
  durability: Durability;
  /** Extra environment of the demo MCP server (the kill test's call log and delay). */
  mcpEnv?: Record<string, string>;
  /** Sent as the connections' `options` (e.g. `-c synchronous_commit=off`). */
  pgOptions?: string;
}

/** One graph over one MCP session and one connection pool. */
export interface LangGraphHarness {
  /** Runs an incident on a new thread `threadId` to its end. */
  run(threadId: string, incident: PeerIncident): Promise<PeerOutcome>;
  /**
   * Continues thread `threadId` from its last checkpoint (`invoke(null, …)`), as a process that
   * restarts after a crash must; `undefined` when the thread has no checkpoint at all. Always
   * `invoke(null)`: `getState().next` is not the test of "ended" after a crash — with durability
   * "async" a kill can land after a step's writes were saved and before the checkpoint that
   * follows them, and `getState` then applies those writes and lists no next step, although
   * `invoke(null)` goes on with it (measured: 1 to 3 of 5 threads in 8 of 9 kill runs).
   */
  resume(threadId: string): Promise<{ how: 'resumed' | 'resumed, getState listed no next step'; outcome: PeerOutcome } | undefined>;
  readonly pool: PgPool;
  close(): Promise<void>;
}

function outcomeOf(messages: readonly LcMessage[]): PeerOutcome {
  const toolCalls = messages.filter((m) => m.type === 'tool').map((m) => m.name ?? '?');
  const last = messages[messages.length - 1];
  return { answer: last?.type === 'ai' && typeof last.content === 'string' ? last.content : '', toolCalls };
}

/** The fake chat model class, on the loaded @langchain/core (LangChain is loaded only when a peer scenario runs). */
function fakeChatModelClass(root: string, messages: MessagesModule) {
  const { BaseChatModel } = peerModule<ChatModelsModule>(root, '@langchain/core/language_models/chat_models');
  let ids = 0;
  return class FakeChatModel extends BaseChatModel {
    constructor() {
      super({});
    }
    _llmType(): string {
      return 'bosun-bench-fake';
    }
    /** The fake ignores the tool definitions: its plan is in the incident. */
    bindTools(): this {
      return this;
    }
    /** Decides from the conversation alone: the first message holds the incident, tool messages count the answered calls. */
    // eslint-disable-next-line @typescript-eslint/require-await -- LangChain's interface is async; the fake answers at once.
    async _generate(history: LcMessage[]): Promise<{ generations: { text: string; message: LcMessage }[] }> {
      const first = history.find((m) => m.type === 'human');
      const incident = parseIncidentText(typeof first?.content === 'string' ? first.content : '');
      const decision = fakeDecision(incident, history.filter((m) => m.type === 'tool').length);
      const message =
        'call' in decision
          ? new messages.AIMessage({
              content: '',
              tool_calls: [{ id: `call_${++ids}`, name: decision.call.tool, args: decision.call.args, type: 'tool_call' }],
            })
          : new messages.AIMessage({ content: decision.answer });
      return { generations: [{ text: 'answer' in decision ? decision.answer : '', message }] };
    }
  };
}

/**
 * Starts the graph: one MCP session to the demo server (`node mcp-servers/demo/dist/bundle/main.js`),
 * a pool of PostgreSQL connections (pg's defaults: at most 10; idle connections are kept, so that
 * the bench can count their backends' CPU), the checkpointer's tables.
 */
export async function startLangGraph(o: LangGraphOptions): Promise<LangGraphHarness> {
  const lg = peerModule<LangGraphModule>(o.root, '@langchain/langgraph');
  const prebuilt = peerModule<PrebuiltModule>(o.root, '@langchain/langgraph/prebuilt');
  const messages = peerModule<MessagesModule>(o.root, '@langchain/core/messages');
  const { PostgresSaver } = peerModule<PostgresSaverModule>(o.root, '@langchain/langgraph-checkpoint-postgres');
  const pg = peerModule<PgModule>(o.root, 'pg');
  const { MultiServerMCPClient } = peerModule<McpAdaptersModule>(o.root, '@langchain/mcp-adapters');

  const mcp = new MultiServerMCPClient({
    mcpServers: {
      demo: {
        transport: 'stdio',
        command: process.execPath,
        args: [join(o.root, 'mcp-servers/demo/dist/bundle/main.js')],
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...o.mcpEnv },
        stderr: 'ignore',
      },
    },
    prefixToolNameWithServerName: false,
    useStandardContentBlocks: true,
  });
  const pool = new pg.Pool({
    connectionString: o.pgUrl,
    application_name: o.appName,
    idleTimeoutMillis: 0,
    ...(o.pgOptions ? { options: o.pgOptions } : {}),
  });
  try {
    const tools = await mcp.getTools();
    const saver = new PostgresSaver(pool, undefined, { schema: o.schema });
    await saver.setup();
    const model = new (fakeChatModelClass(o.root, messages))().bindTools();
    const graph = new lg.StateGraph(lg.MessagesAnnotation)
      .addNode('agent', async (state: { messages: LcMessage[] }) => ({ messages: [await model.invoke(state.messages)] }))
      .addNode('tools', new prebuilt.ToolNode(tools))
      .addEdge(lg.START, 'agent')
      .addConditionalEdges('agent', prebuilt.toolsCondition, ['tools', lg.END])
      .addEdge('tools', 'agent')
      .compile({ checkpointer: saver });
    const config = (threadId: string): ThreadConfig => ({ configurable: { thread_id: threadId }, durability: o.durability });
    return {
      pool,
      async run(threadId, incident) {
        const out = await graph.invoke({ messages: [new messages.HumanMessage(JSON.stringify(incident))] }, config(threadId));
        return outcomeOf(out.messages);
      },
      async resume(threadId) {
        const state = await graph.getState(config(threadId));
        const had = state.values.messages ?? [];
        if (had.length === 0) return undefined;
        return {
          how: state.next.length === 0 ? 'resumed, getState listed no next step' : 'resumed',
          outcome: outcomeOf((await graph.invoke(null, config(threadId))).messages),
        };
      },
      async close() {
        await mcp.close();
        await pool.end();
      },
    };
  } catch (err) {
    await mcp.close().catch(() => undefined); // the start already failed; that error is the one to report
    await pool.end().catch(() => undefined); // same
    throw err;
  }
}
