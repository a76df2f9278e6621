import type { TaskResult } from '@bosun/contract';
import type { ToolCall } from '@bosun/models';
import { endIncomplete } from './task-end.js';
import type { TaskRun } from './task-run.js';

/**
 * The correction step for a turn whose tool-call arguments did not parse (the adapter sets
 * `argsError`): nothing of the turn runs; every call is answered with an error, the malformed
 * ones saying what was wrong, and the model tries again. Each such turn counts as an invalid
 * output: past `maxInvalidOutputs` the task fails with the adapter's description.
 */
export async function malformedArgsStep(run: TaskRun, calls: readonly ToolCall[]): Promise<TaskResult | undefined> {
  const { spec, state } = run;
  const bad = calls.filter((c) => c.argsError !== undefined);
  state.invalidOutputs++;
  if (state.invalidOutputs > spec.maxInvalidOutputs) {
    const problem = bad.map((c) => `${c.name}: ${c.argsError ?? ''}`).join('; ');
    return endIncomplete(run, {
      kind: 'failure',
      reason: `the model sent malformed tool-call arguments ${state.invalidOutputs} times: ${problem}`,
    });
  }
  state.messages.push({
    role: 'tool',
    responses: calls.map((c) =>
      c.argsError !== undefined
        ? {
            id: c.id,
            name: c.name,
            isError: true,
            // The turn goes back with `{}` as its arguments (strict servers refuse text that is
            // not JSON there): what the model sent, and what is wrong with it, is said here.
            output: `Not executed: ${c.argsError}. You sent as arguments: ${clip(c.rawArgs ?? '', 2_000)}. Call it again with a JSON object as arguments.`,
          }
        : { id: c.id, name: c.name, isError: true, output: 'Not executed: another call of the same turn had malformed arguments.' },
    ),
  });
  run.deps.log.warn({ taskId: run.job.taskId, calls: bad.map((c) => c.name) }, 'malformed tool-call arguments: correction turn');
  await run.save();
  return undefined;
}

function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}… [${text.length - max} more characters]` : text;
}
