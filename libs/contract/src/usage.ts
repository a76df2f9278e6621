import { z } from 'zod';

/**
 * What a task or a run has spent: tokens, model calls, tool calls and the estimated cost (from
 * the config's price table; 0 for a model without a price). Stored in the task checkpoint, so a
 * resumed task goes on from what it had spent; reported in task and run results and in the
 * `agent.*` / `run.completed` events. Additive in v1.
 */
export const UsageTotals = z.object({
  inputTokens: z.number().int().nonnegative(),
  outputTokens: z.number().int().nonnegative(),
  modelCalls: z.number().int().nonnegative(),
  toolCalls: z.number().int().nonnegative(),
  /** Estimated cost in US dollars. */
  costUsd: z.number().nonnegative(),
  /** Model calls the fallback model answered because the primary failed; absent when none. */
  fallbacks: z.number().int().nonnegative().optional(),
  /** Of `outputTokens`: the models' reasoning (billed as output); absent when none. Additive in v1. */
  reasoningTokens: z.number().int().nonnegative().optional(),
  /** Of `inputTokens`: read from the provider's prompt cache (priced at the cached rate); absent when none. Additive in v1. */
  cachedInputTokens: z.number().int().nonnegative().optional(),
  /** Of `inputTokens`: written to the provider's prompt cache (Anthropic); absent when none. Additive in v1. */
  cacheWriteTokens: z.number().int().nonnegative().optional(),
  /** Steps the context budget took to make requests fit the model's window (`model.context_trimmed`); absent when none. Additive in v1. */
  contextTrims: z.number().int().nonnegative().optional(),
});
export type UsageTotals = z.infer<typeof UsageTotals>;

/** The counts of {@link UsageTotals} that are absent while they are 0. */
const OPTIONAL_COUNTS = ['fallbacks', 'reasoningTokens', 'cachedInputTokens', 'cacheWriteTokens', 'contextTrims'] as const;

/** Nothing spent yet. */
export function emptyUsage(): UsageTotals {
  return { inputTokens: 0, outputTokens: 0, modelCalls: 0, toolCalls: 0, costUsd: 0 };
}

/** The sum of usages (undefined ones count as nothing). */
export function sumUsage(...parts: (UsageTotals | undefined)[]): UsageTotals {
  const total = emptyUsage();
  for (const p of parts) {
    if (!p) continue;
    total.inputTokens += p.inputTokens;
    total.outputTokens += p.outputTokens;
    total.modelCalls += p.modelCalls;
    total.toolCalls += p.toolCalls;
    total.costUsd += p.costUsd;
    for (const k of OPTIONAL_COUNTS) {
      const v = p[k];
      if (v) total[k] = (total[k] ?? 0) + v;
    }
  }
  total.costUsd = roundCost(total.costUsd);
  return total;
}

/** A cost rounded to a millionth of a dollar (sums of floats stay readable). */
export function roundCost(usd: number): number {
  return Math.round(usd * 1e6) / 1e6;
}
