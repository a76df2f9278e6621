import { z } from 'zod';

/**
 * Limits on what a task (or a run) may spend. Every field is optional: an absent one is no
 * limit. Token limits count what the provider reports; `costUsd` is estimated from `prices`.
 */
export const BudgetLimits = z
  .object({
    inputTokens: z.number().int().positive().optional(),
    outputTokens: z.number().int().positive().optional(),
    modelCalls: z.number().int().positive().optional(),
    toolCalls: z.number().int().positive().optional(),
    costUsd: z.number().positive().optional(),
  })
  .strict();
export type BudgetLimits = z.output<typeof BudgetLimits>;

/** `budgets`: the defaults of every task (`task`) and of every run (`run`). */
export const Budgets = z.object({ task: BudgetLimits.optional(), run: BudgetLimits.optional() }).strict();

/**
 * A model's price in US dollars per million tokens. Output (reasoning included) is priced at
 * `outputPerMTok`; input read from the provider's prompt cache at `cachedInputPerMTok` and input
 * written to it at `cacheWritePerMTok`, each `inputPerMTok` when absent.
 */
export const ModelPrice = z
  .object({
    inputPerMTok: z.number().nonnegative(),
    outputPerMTok: z.number().nonnegative(),
    cachedInputPerMTok: z.number().nonnegative().optional(),
    cacheWritePerMTok: z.number().nonnegative().optional(),
  })
  .strict();
export type ModelPrice = z.output<typeof ModelPrice>;

/** `prices`: by the model's name as Bosun shows it (`openai:gpt-4.1-mini`, `gemini:gemini-2.5-flash`, `fake`). */
export const PriceTable = z.record(z.string().min(1), ModelPrice);

/** The limits of one specialist's tasks: `budgets.task`, with the specialist's own `budget` over it. */
export function taskBudget(
  config: { budgets: { task?: BudgetLimits | undefined } },
  specialist: { budget?: BudgetLimits | undefined },
): BudgetLimits {
  return { ...config.budgets.task, ...specialist.budget };
}

/** The price of a model by its name, when the table has one. */
export function priceOf(config: { prices: Record<string, ModelPrice> }, modelName: string): ModelPrice | undefined {
  return Object.hasOwn(config.prices, modelName) ? config.prices[modelName] : undefined;
}
