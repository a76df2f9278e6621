import type { GenerateOptions, Model, ModelRequest, ModelResponse } from '@bosun/models';
import type { Telemetry } from './ports.js';

/** The provider part of a model's name: `gemini` of `gemini:gemini-2.5-flash`, `fake` of `fake`. */
export function modelProvider(name: string): string {
  const i = name.indexOf(':');
  return i < 0 ? name : name.slice(0, i);
}

/** The model part of a model's name: `gemini-2.5-flash` of `gemini:gemini-2.5-flash`, `fake` of `fake`. */
function modelId(name: string): string {
  const i = name.indexOf(':');
  return i < 0 ? name : name.slice(i + 1);
}

/**
 * The model, observed: each call is a span that follows the OpenTelemetry GenAI conventions
 * (`chat <model>`: operation, provider, model, agent, token usage; never the prompt) and is
 * counted by agent, provider and outcome, with its latency and tokens (`bosun_model_…` metrics).
 * The call itself is unchanged; an error is counted, marked on the span and thrown as it was.
 * `telemetry`: where the spans and counts go (transport's `loopTelemetry` in a service).
 */
export function observedModel(model: Model, telemetry: Telemetry): Model {
  const provider = modelProvider(model.name);
  const requestModel = modelId(model.name);
  return {
    name: model.name,
    async generate(request: ModelRequest, options?: GenerateOptions): Promise<ModelResponse> {
      const attributes = {
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': provider,
        'gen_ai.request.model': requestModel,
        'gen_ai.agent.name': request.agent,
        'bosun.model.mode': request.mode,
        'bosun.model.tools_offered': request.tools.length,
      };
      const started = performance.now();
      const done = (outcome: 'ok' | 'error', response?: ModelResponse) =>
        telemetry.modelCall({
          agent: request.agent,
          provider,
          outcome,
          seconds: (performance.now() - started) / 1000,
          ...(response?.usage?.inputTokens === undefined ? {} : { inputTokens: response.usage.inputTokens }),
          ...(response?.usage?.outputTokens === undefined ? {} : { outputTokens: response.usage.outputTokens }),
        });
      return telemetry.clientSpan(`chat ${requestModel}`, attributes, async (span) => {
        let response: ModelResponse;
        try {
          response = await model.generate(request, options);
        } catch (err) {
          done('error');
          throw err;
        }
        done('ok', response);
        const { usage } = response;
        span.setAttributes({
          ...(response.model ? { 'gen_ai.response.model': response.model } : {}),
          ...(usage?.inputTokens === undefined ? {} : { 'gen_ai.usage.input_tokens': usage.inputTokens }),
          ...(usage?.outputTokens === undefined ? {} : { 'gen_ai.usage.output_tokens': usage.outputTokens }),
          'bosun.model.calls': response.calls.length,
        });
        return response;
      });
    },
  };
}
