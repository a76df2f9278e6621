import { taskIdFor } from '@bosun/contract';
import type { RunContext } from './run-parts.js';

/**
 * Route mode: the parts of this round whose CodeAct script ended with `transfer_to_agent` become
 * delegations to the named specialists in one more round, within `coordinator.maxRounds` (rounds
 * count from 0). Each supersedes the part it takes over (`transferOf`). True when a round was
 * added; its delegations are dispatched next. A transfer past the last round stays as it is: an
 * INCOMPLETE part that says which specialist it asked for.
 */
export function transferRound(ctx: RunContext): boolean {
  const { state, deps } = ctx;
  if (state.round + 1 >= deps.config.coordinator.maxRounds) return false;
  const handing = state.delegations.filter(
    (d) => d.round === state.round && d.result?.transfer && !state.delegations.some((x) => x.transferOf === d.taskId),
  );
  if (handing.length === 0) return false;
  state.round++;
  for (const d of handing) {
    const { agent, reason } = d.result!.transfer!;
    state.delegations.push({
      taskId: taskIdFor(state.runId, state.delegations.length, agent),
      agent,
      round: state.round,
      transferOf: d.taskId,
      task: `${d.agent} handed this incident over to you${reason ? `: ${reason}` : ''}. Investigate it within your domain (${agent}) and report what you find.`,
    });
  }
  deps.events.emit({
    type: 'run.routed',
    runId: state.runId,
    incidentId: state.incidentId,
    data: { specialists: state.delegations.filter((d) => d.round === state.round).map((d) => d.agent), round: state.round, transfer: true },
  });
  return true;
}
