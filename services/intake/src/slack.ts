import { isStalled, type ApprovalAnnouncement, type DeliveryJob } from '@bosun/contract';

const STATUS_WORD: Record<string, string> = {
  completed: 'completed',
  partial: 'PARTIAL — not everything was checked',
  failed: 'FAILED',
  cancelled: 'cancelled',
};

/** The parts of a run that did not complete, by name and why (`database (stalled)`). */
export function notChecked(result: DeliveryJob['result']): string[] {
  return result.specialists
    .filter((s) => s.status !== 'completed' || isStalled(s.output))
    .map((s) => `${s.name} (${s.status === 'completed' ? 'stalled' : s.status})`);
}

/** Escapes Slack's three control characters in text from the run. */
function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/**
 * The Slack message of a delivery: the status, the incident, the answer's first lines, the
 * INCOMPLETE parts named, the calls in doubt, and links (run page, runbook).
 */
export function slackText(job: DeliveryJob, options: { answerLines: number; runUrl?: string }): string {
  const { incident, result } = job;
  const lines = [
    `*Bosun* — incident \`${esc(incident.id)}\` (${esc(incident.reason)}, ${incident.severity}): *${STATUS_WORD[result.status] ?? result.status}*`,
  ];
  if (incident.title !== '') lines.push(`> ${esc(incident.title)}`);
  const answer = result.answer.split('\n').filter((l) => l.trim() !== '');
  lines.push(...answer.slice(0, options.answerLines).map(esc));
  if (answer.length > options.answerLines) lines.push(`_… ${answer.length - options.answerLines} more lines in the run result_`);
  const missing = notChecked(result);
  if (missing.length > 0) lines.push(`:warning: *Not checked (INCOMPLETE):* ${missing.map(esc).join(', ')}`);
  if (result.inDoubt)
    lines.push(`:warning: *In doubt:* ${result.inDoubt.calls.map((c) => `${esc(c.tool)} by ${esc(c.agent)}`).join(', ')}`);
  if (result.cancelled) lines.push(`Cancelled by ${esc(result.cancelled.by)}: ${esc(result.cancelled.reason)}`);
  const links = [`run \`${result.runId}\``];
  if (options.runUrl) links.push(`<${options.runUrl.replace('{runId}', encodeURIComponent(result.runId))}|run page>`);
  if (incident.runbookUrl) links.push(`<${incident.runbookUrl}|runbook>`);
  if (result.runbook?.name) links.push(`runbook followed: ${esc(result.runbook.name)}`);
  lines.push(links.join(' · '));
  return lines.join('\n');
}

/** The commands that decide an approval, as an operator types them. */
export function approvalCommands(id: string): { approve: string; deny: string } {
  return { approve: `npx bosun approve ${id}`, deny: `npx bosun deny ${id} --reason "<why>"` };
}

/** The Slack message announcing a pending approval: who asks, for which calls, until when, and the commands that decide it. */
export function approvalText(job: ApprovalAnnouncement, commands: { approve: string; deny: string }): string {
  const a = job.approval;
  const calls = a.calls.filter((c) => c.needsApproval).map((c) => `\`${esc(c.tool)}\` ${esc(JSON.stringify(c.args)).slice(0, 300)}`);
  return [
    `:raising_hand: *Approval needed* — run \`${a.runId}\` (incident \`${esc(a.incidentId)}\`), agent ${esc(a.agent)}`,
    ...calls.map((c) => `• ${c}`),
    ...(a.reason ? [`> ${esc(a.reason.split('\n')[0] ?? '')}`] : []),
    `Approval \`${a.id}\`, until ${a.timeoutAt} (then denied). Approve: \`${commands.approve}\` · deny: \`${commands.deny}\``,
  ].join('\n');
}
