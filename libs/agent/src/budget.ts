import { emptyUsage, roundCost, type UsageTotals } from '@bosun/contract';
import type { BudgetLimits, ModelPrice } from '@bosun/config';
import type { Usage } from '@bosun/models';

/**
 * What a model call spent: its tokens as billed (reasoning in the output, cached and cache-written
 * input in the input), one call, and its estimated cost at `price` — cached input at the cached
 * rate and cache writes at the write rate when the price gives them.
 */
export function modelCallUsage(usage: Usage | undefined, price: ModelPrice | undefined, fellBack = false): UsageTotals {
  const inputTokens = usage?.inputTokens ?? 0;
  const outputTokens = usage?.outputTokens ?? 0;
  const cached = Math.min(inputTokens, usage?.cachedInputTokens ?? 0);
  const written = Math.min(inputTokens - cached, usage?.cacheWriteTokens ?? 0);
  const costUsd = price
    ? roundCost(
        ((inputTokens - cached - written) * price.inputPerMTok +
          cached * (price.cachedInputPerMTok ?? price.inputPerMTok) +
          written * (price.cacheWritePerMTok ?? price.inputPerMTok) +
          outputTokens * price.outputPerMTok) /
          1e6,
      )
    : 0;
  return {
    ...emptyUsage(),
    inputTokens,
    outputTokens,
    modelCalls: 1,
    costUsd,
    ...(fellBack ? { fallbacks: 1 } : {}),
    ...(usage?.reasoningTokens ? { reasoningTokens: usage.reasoningTokens } : {}),
    ...(cached ? { cachedInputTokens: cached } : {}),
    ...(written ? { cacheWriteTokens: written } : {}),
  };
}

/** The next thing a task would spend on. */
export type Spend = { modelCall: true } | { toolCalls: number };

/**
 * Why `next` would cross a limit, or undefined when it fits. A model call needs a call left and
 * tokens and cost not used up (its own tokens are known only after it); tool calls need that
 * many calls left. The reason names the limit and what was spent.
 */
export function overBudget(spent: UsageTotals, limits: BudgetLimits | undefined, next: Spend, whose = 'its'): string | undefined {
  if (!limits) return undefined;
  const stopped = `stopped at ${whose} budget`;
  if ('toolCalls' in next) {
    const max = limits.toolCalls;
    if (max !== undefined && spent.toolCalls + next.toolCalls > max)
      return `${stopped}: ${next.toolCalls} more tool call(s) would cross the limit of ${max} tool calls (${spent.toolCalls} made)`;
    return undefined;
  }
  const checks: [number | undefined, number, string][] = [
    [limits.modelCalls, spent.modelCalls + 1, `model calls (${spent.modelCalls} made)`],
    [limits.inputTokens, spent.inputTokens + 1, `input tokens (${spent.inputTokens} used)`],
    [limits.outputTokens, spent.outputTokens + 1, `output tokens (${spent.outputTokens} used)`],
  ];
  for (const [max, needed, what] of checks) {
    if (max !== undefined && needed > max) return `${stopped}: another model call would cross the limit of ${max} ${what}`;
  }
  if (limits.costUsd !== undefined && spent.costUsd >= limits.costUsd)
    return `${stopped}: another model call would cross the limit of $${limits.costUsd} (estimated $${spent.costUsd} spent)`;
  return undefined;
}
