import type { ClusterConfig, ModelSpec } from '@bosun/config';
import { ResilientModel, createModel, type CallLimiter, type FakeModelOptions, type Model } from '@bosun/models';

/** The cluster-wide limits of one model name, as configured (`rateLimits`). */
export type ModelRateLimits = ClusterConfig['rateLimits'][string];

/** What {@link buildModel} needs: the agent's model spec, the cluster config, the keys and the limiters. */
export interface ModelSetup {
  spec: ModelSpec;
  config: Pick<ClusterConfig, 'rateLimits'>;
  /** `GEMINI_API_KEY`, `OPENAI_API_KEY` and `ANTHROPIC_API_KEY`, when set. */
  keys: { gemini?: string | undefined; openai?: string | undefined; anthropic?: string | undefined };
  fake?: FakeModelOptions;
  /**
   * Makes the cluster-wide limiter of a model name with its configured limits (transport's
   * `redisRateLimiters` in a service); no limits are applied without it.
   */
  limiters?: ((name: string, limits: ModelRateLimits) => CallLimiter) | undefined;
  /** Wait for the rate limiter in the call however long it takes (the coordinator), instead of handing the task back. */
  waitInline?: boolean;
}

type Spec = Omit<ModelSpec, 'fallback'>;

function build(spec: Spec, setup: ModelSetup): Model {
  return createModel(
    { ...spec, apiKey: setup.keys.gemini, openaiApiKey: setup.keys.openai, anthropicApiKey: setup.keys.anthropic },
    setup.fake,
  );
}

function limiterFor(model: Model, setup: ModelSetup): CallLimiter | undefined {
  const limits = Object.hasOwn(setup.config.rateLimits, model.name) ? setup.config.rateLimits[model.name] : undefined;
  if (!limits || !setup.limiters) return undefined;
  return setup.limiters(model.name, limits);
}

/**
 * The model an agent uses: its provider's adapter, with retries (`model.retry`), the cluster-wide
 * rate limit of its name (`rateLimits`), and its `model.fallback` when one is configured.
 */
export function buildModel(setup: ModelSetup): ResilientModel {
  const primary = build(setup.spec, setup);
  const fallback = setup.spec.fallback ? build(setup.spec.fallback, setup) : undefined;
  return new ResilientModel({
    primary,
    fallback,
    retry: setup.spec.retry,
    limiter: limiterFor(primary, setup),
    fallbackLimiter: fallback ? limiterFor(fallback, setup) : undefined,
    ...(setup.waitInline ? { maxInlineWaitMs: Number.POSITIVE_INFINITY } : {}),
  });
}
