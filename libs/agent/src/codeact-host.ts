import {
  BosunError,
  callFingerprint,
  toolCallKey,
  type CodeActAnswer,
  type CodeActCall,
  type CodeActJournal,
  type ToolCallResult,
  errorMessage,
} from '@bosun/contract';
import type { SandboxHost } from '@bosun/sandbox';
import { scriptApproval } from './codeact-approval.js';
import { notApproved } from './task-approval.js';
import { budgetStop, chargeToolCalls } from './task-budget.js';
import type { TaskRun } from './task-run.js';

/** A replayed script asked for another call than the journal holds at the same position. */
export class NonDeterminismError extends BosunError {
  constructor(message: string) {
    super('non_deterministic', message);
    this.name = 'NonDeterminismError';
  }
}

/** The host could not do what the script asked (the gateway could not be reached): the task cannot go on. */
export class ScriptHostFailure extends BosunError {
  constructor(message: string, cause: unknown) {
    super('script_host_failure', message, { cause });
    this.name = 'ScriptHostFailure';
  }
}

/**
 * The script's next call would cross the task's or the run's budget: the call is not sent, the
 * script is stopped there (it cannot catch this) and the task ends INCOMPLETE `budget`.
 */
export class ScriptOverBudget extends BosunError {
  constructor(readonly reason: string) {
    super('over_budget', reason);
    this.name = 'ScriptOverBudget';
  }
}

/** The task was cancelled before one of the script's effects: nothing more may take effect. */
export class ScriptCancelled extends BosunError {
  constructor() {
    super('cancelled', "the task was cancelled before the script's next effect");
    this.name = 'ScriptCancelled';
  }
}

/** A tool's text that is JSON is given to the script parsed; other text as it is. */
function parsedText(text: string): unknown {
  const t = text.trim();
  if (!/^[[{]/.test(t)) return text;
  try {
    return JSON.parse(t) as unknown;
  } catch {
    return text;
  }
}

/** What the script sees of a call's result. */
export function toAnswer(result: ToolCallResult): CodeActAnswer {
  if (result.status === 'error') return { error: `the tool call failed: ${result.error ?? 'unknown error'}` };
  if (result.isError) return { error: result.text || 'the tool reported an error' };
  return { ok: result.structured ?? parsedText(result.text) };
}

/**
 * The sandbox's host for one run of one script, over the task's journal. Each `call_tool` is
 * checked against the journal at its position: a call already answered is answered from it; a
 * call sent but unanswered (the process died) is sent again under the same key, which the
 * gateway answers from its record (or reports in doubt) without running the tool again; another
 * call than the journal holds ends the task as non-deterministic, never executed. A new call is
 * written to the journal and the checkpoint saved before it is sent. The clock and `Math.random`
 * give the journal's values in order, then new ones, which the sandbox reports before the next
 * call and are recorded.
 */
export class ScriptHost implements SandboxHost {
  readonly tools: string[];
  /** What the script read on its earlier runs, given back first (a copy: new values are appended to the journal). */
  readonly recorded: { clock: readonly number[]; random: readonly number[] };

  constructor(
    private readonly run: TaskRun,
    private readonly journal: CodeActJournal,
    private readonly timeoutMs: number,
  ) {
    this.tools = run.tools.allowed.map((t) => t.name);
    this.recorded = { clock: [...journal.clock], random: [...journal.random] };
  }

  /** New values of the clock and Math.random(), in order: into the journal, saved with the checkpoint before the next effect. */
  record(values: { clock: number[]; random: number[] }): void {
    // A loop on Date.now() reads it millions of times: appended one by one, not spread.
    for (const v of values.clock) this.journal.clock.push(v);
    for (const v of values.random) this.journal.random.push(v);
    this.run.dirty = true;
  }

  async callTool(name: string, args: Record<string, unknown>, index: number): Promise<CodeActAnswer> {
    const { run } = this;
    // A call not yet in the journal is a new spend: checked against the budget before it is
    // recorded, and counted in the same checkpoint write as its journal entry (a replay of a
    // journaled call is never counted again).
    if (index >= this.journal.calls.length) {
      const over = await budgetStop(run, { toolCalls: 1 });
      if (over) throw new ScriptOverBudget(over);
    }
    const call = this.entry(name, args, index);
    if (call.answer) {
      this.emitReplay(call, index, 'journal');
      return call.answer;
    }
    const tool = run.tools.byName.get(name);
    let approvalId: string | undefined;
    if (tool && run.tools.policy.stateOf(tool) === 'ask') {
      const approval = await scriptApproval(run, call, index, tool);
      const refused = notApproved(approval, index);
      if (refused) return this.answered(call, { error: `not executed: ${refused}` });
      approvalId = approval.id;
    }
    return this.send(call, index, approvalId);
  }

  /** The journal's call at this position (appended when new); throws when it is another call. */
  private entry(name: string, args: Record<string, unknown>, index: number): CodeActCall {
    const { journal, run } = this;
    const key = toolCallKey(run.job.taskId, journal.step, index);
    const known = journal.calls[index];
    if (!known) {
      const call: CodeActCall = { key, tool: name, args };
      journal.calls.push(call);
      chargeToolCalls(run, 1);
      run.dirty = true;
      return call;
    }
    if (known.tool !== name || callFingerprint(known.tool, known.args) !== callFingerprint(name, args)) {
      throw new NonDeterminismError(
        `non-deterministic script: at step ${journal.step}, call ${index} (key ${key}) the journal holds ${known.tool} ${JSON.stringify(known.args)}, but the script run again asked for ${name} ${JSON.stringify(args)}; the new call was not executed`,
      );
    }
    return known;
  }

  private async send(call: CodeActCall, index: number, approvalId: string | undefined): Promise<CodeActAnswer> {
    const { run } = this;
    const { job, spec, deps, state } = run;
    const resent = state.pending?.kind === 'tools' && state.pending.keys.includes(call.key);
    if (resent) this.emitReplay(call, index, 'gateway');
    state.pending = { kind: 'tools', step: this.journal.step, keys: [call.key], at: new Date(run.now()).toISOString() };
    await run.save();
    if (await run.isCancelled()) throw new ScriptCancelled();
    const timeoutMs = Math.max(1_000, Math.min(this.timeoutMs, run.deadline() - run.now()));
    let result: ToolCallResult;
    try {
      const sent = { v: 1 as const, key: call.key, runId: job.runId, incidentId: job.incidentId, agent: spec.name, tool: call.tool };
      result = await deps.tools.call(
        { ...sent, args: call.args, ...(approvalId ? { approvalId } : {}) },
        Number.isFinite(timeoutMs) ? { timeoutMs } : {},
      );
    } catch (err) {
      throw new ScriptHostFailure(`the tool call ${call.key} (${call.tool}) could not be completed: ${errorMessage(err)}`, err);
    }
    if (result.inDoubt && !state.inDoubt?.some((d) => d.key === call.key)) (state.inDoubt ??= []).push({ key: call.key, tool: call.tool });
    delete state.pending;
    return this.answered(call, toAnswer(result));
  }

  private answered(call: CodeActCall, answer: CodeActAnswer): CodeActAnswer {
    call.answer = answer;
    this.run.dirty = true;
    return answer;
  }

  private emitReplay(call: CodeActCall, index: number, source: 'journal' | 'gateway'): void {
    this.run.emit('codeact.replayed', {
      taskId: this.run.job.taskId,
      step: this.journal.step,
      index,
      key: call.key,
      tool: call.tool,
      source,
    });
  }
}
