import type { GenerateOptions, Model, ModelRequest, ModelResponse } from '@bosun/models';
import { metrics } from '@bosun/transport';

/** The provider part of a model's name: `gemini` of `gemini:gemini-2.5-flash`, `fake` of `fake`. */
export function modelProvider(name: string): string {
  const i = name.indexOf(':');
  return i < 0 ? name : name.slice(0, i);
}

/**
 * The model, observed: each call is counted by agent, provider and outcome, with its latency and
 * the tokens it reported (`bosun_model_…` metrics). The call itself is unchanged; an error is
 * counted and thrown as it was.
 */
export function observedModel(model: Model): Model {
  const provider = modelProvider(model.name);
  return {
    name: model.name,
    async generate(request: ModelRequest, options?: GenerateOptions): Promise<ModelResponse> {
      const started = performance.now();
      const done = (outcome: 'ok' | 'error', response?: ModelResponse) =>
        metrics.modelCall({
          agent: request.agent,
          provider,
          outcome,
          seconds: (performance.now() - started) / 1000,
          ...(response?.usage?.inputTokens === undefined ? {} : { inputTokens: response.usage.inputTokens }),
          ...(response?.usage?.outputTokens === undefined ? {} : { outputTokens: response.usage.outputTokens }),
        });
      try {
        const response = await model.generate(request, options);
        done('ok', response);
        return response;
      } catch (err) {
        done('error');
        throw err;
      }
    },
  };
}
