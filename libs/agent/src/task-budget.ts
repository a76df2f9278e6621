import { emptyUsage } from '@bosun/contract';
import { overBudget, type Spend } from './budget.js';
import type { TaskRun } from './task-run.js';

/**
 * Why the task must stop before spending `next`, or undefined: its own budget first, then its
 * run's (`budgets.run`), checked against the run's ledger after writing the task's own total
 * there — so every part of the run sees what the others have spent.
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
