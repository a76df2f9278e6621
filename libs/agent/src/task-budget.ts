import { emptyUsage, sumUsage } from '@bosun/contract';
import type { ModelResponse } from '@bosun/models';
import { modelCallUsage, overBudget, type Spend } from './budget.js';
import type { TaskRun } from './task-run.js';

/**
 * Why the task must stop before spending `next`, or undefined: its own budget first, then its
 * run's (`budgets.run`), checked against the run's ledger after writing the task's own total
 * there — so every part of the run sees what the others have spent. Shared by both loops.
 */
export async function budgetStop(run: TaskRun, next: Spend): Promise<string | undefined> {
  const own = run.state.usage ?? emptyUsage();
  const overTask = overBudget(own, run.spec.budget, next);
  if (overTask) return overTask;
  const runBudget = run.deps.runBudget;
  if (!runBudget || Object.keys(runBudget.limits).length === 0) return undefined;
  await runBudget.ledger.record(run.job.runId, run.job.taskId, own);
  return overBudget(await runBudget.ledger.total(run.job.runId), runBudget.limits, next, "the run's");
}

/**
 * Counts a model call in the task's usage: its tokens, one call, its estimated cost (at the
 * fallback's price when it fell back) and the fallback. The caller saves it in the same
 * checkpoint write as the turn itself, so a resumed task never counts it again.
 */
export function chargeModelCall(run: TaskRun, response: ModelResponse): void {
  const price = response.fallback ? run.deps.fallbackPrice : run.deps.price;
  run.state.usage = sumUsage(run.state.usage, modelCallUsage(response.usage, price, response.fallback !== undefined));
}

/** Counts `n` tool calls in the task's usage (saved with the checkpoint write made before they are sent). */
export function chargeToolCalls(run: TaskRun, n: number): void {
  run.state.usage = sumUsage(run.state.usage, { ...emptyUsage(), toolCalls: n });
}
