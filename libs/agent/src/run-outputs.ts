/**
 * A task's output stored once: in its task checkpoint (`result.output`). The task job's return
 * value says `outputIn: "checkpoint"` instead of carrying it (and so does its parent's copy of
 * it); the run keeps that reference in its checkpoint and reads the output back when it needs it
 * (to answer, or to give it to the model), in memory only. Results stored whole, by earlier
 * versions or by the coordinator itself (INCOMPLETE parts), are read as they are.
 */
import { TaskCheckpoint, outputByReference, stallText, taskCheckpointId, type RunCheckpoint } from '@bosun/contract';
import type { RunDeps } from './run-ports.js';

/** What reading outputs needs of a run: its ports, its state, and the task ids whose outputs it has read. */
export interface OutputsContext {
  deps: Pick<RunDeps, 'checkpoints' | 'log'>;
  state: RunCheckpoint;
  /** The delegations (task ids) whose referred output this process has read into their result. */
  outputsRead?: Set<string>;
}

/**
 * Reads into the delegations' results the outputs they refer to and this process has not read
 * yet (one checkpoint read each, all at once). A task checkpoint without the result (expired, or
 * another task's) makes the part `failed`, saying so, rather than a hole.
 */
export async function readOutputs(ctx: OutputsContext): Promise<void> {
  const read = (ctx.outputsRead ??= new Set());
  const wanted = ctx.state.delegations.filter((d) => d.result?.outputIn === 'checkpoint' && !read.has(d.taskId));
  await Promise.all(
    wanted.map(async (d) => {
      const id = taskCheckpointId(d.taskId);
      const stored = TaskCheckpoint.resultOf(await ctx.deps.checkpoints.load(id), id);
      const r = d.result!;
      if (stored && stored.taskId === d.taskId && stored.outputIn === undefined) {
        d.result = { ...r, output: stored.output };
        read.add(d.taskId);
        return;
      }
      const reason = `its output is not in checkpoint ${id} (expired or never written)`;
      ctx.deps.log.warn({ taskId: d.taskId, runId: ctx.state.runId }, `task result: ${reason}`);
      const { outputIn: _ref, ...whole } = r;
      d.result = { ...whole, status: 'failed', output: stallText(d.agent, '', reason), error: reason };
    }),
  );
}

/**
 * The run checkpoint as stored: the outputs read from task checkpoints stay there (`output: null`
 * beside `outputIn`). The state itself is not changed.
 */
export function storedRun(state: RunCheckpoint): RunCheckpoint {
  if (!state.delegations.some((d) => d.result?.outputIn === 'checkpoint' && d.result.output !== null)) return state;
  return {
    ...state,
    delegations: state.delegations.map((d) => (d.result?.outputIn === 'checkpoint' ? { ...d, result: outputByReference(d.result) } : d)),
  };
}
