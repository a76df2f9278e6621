import { BosunError, abortable, type Catalog, type ToolCallJob, type ToolCallResult } from '@bosun/contract';
import { SpanKind, inSpan, traceCarrier } from '../base/tracing.js';
import { toolOutcome, type ToolCallOptions, type ToolClient } from './tools.js';

/** What {@link DirectToolClient} calls: a gateway hosted in the same process. */
export interface InProcessGateway {
  /** The gateway's catalog, as it would publish it. */
  catalog(): Catalog;
  /**
   * Runs one call through the gateway's whole way (policy, approval, claim, MCP call, record,
   * events, audit): the same as a call from the queue or NATS, only not carried by either.
   */
  execute(call: ToolCallJob): Promise<ToolCallResult>;
}

/**
 * The tool client of a specialist that shares its process with the gateway (`bosun serve`): a
 * call is a function call, with no job and no request, and the gateway records it in Redis under
 * its key as it records every call. What makes a call run at most once is that record and its
 * claim, not the way the call came: after a crash, the task's next owner (in this layout or
 * another) sends the same key and is answered from the record, or told the call is in doubt.
 */
export class DirectToolClient implements ToolClient {
  constructor(private readonly gateway: InProcessGateway) {}

  catalog(): Promise<Catalog> {
    return Promise.resolve(this.gateway.catalog());
  }

  /**
   * Runs the call in the gateway, in a span as the other clients' (so that the gateway's span
   * sits under it). `timeoutMs` and `signal` stop the wait, not the call: the gateway still
   * records its outcome under the key.
   */
  call(call: ToolCallJob, options: ToolCallOptions = {}): Promise<ToolCallResult> {
    const attributes = {
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': call.tool,
      'bosun.tool.key': call.key,
      'bosun.tool.transport': 'direct',
    };
    return inSpan(`execute_tool ${call.tool}`, { kind: SpanKind.INTERNAL, attributes }, async (span) => {
      const work = this.gateway.execute({ ...call, ...traceCarrier() });
      const result = await abortable(withDeadline(work, call, options.timeoutMs), options.signal, `tool call ${call.key}`);
      span.setAttribute('bosun.tool.outcome', toolOutcome(result));
      return result;
    });
  }
}

/** The call's result, or a `retryable` error once `timeoutMs` has passed (the call runs on). */
function withDeadline(work: Promise<ToolCallResult>, call: ToolCallJob, timeoutMs: number | undefined): Promise<ToolCallResult> {
  if (timeoutMs === undefined) return work;
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(
      () => reject(new BosunError('retryable', `the tool call ${call.key} (${call.tool}) did not finish within ${timeoutMs} ms`)),
      timeoutMs,
    );
  });
  // The call's own outcome, once the deadline has answered, is recorded by the gateway: not awaited here.
  work.catch(() => undefined);
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
}
