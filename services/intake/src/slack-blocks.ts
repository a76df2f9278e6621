/**
 * The Block Kit message of a pending approval (Slack app mode): the incident (title, severity,
 * service, source), how far it has got ("0 of 1"), the agent's stated reason, the evidence (the
 * incident's summary), the run so far (the other specialists' last findings, the asking agent's
 * latest earlier steps), each call needing approval with its arguments as stored (secrets
 * already redacted by the store), when it times out, and Approve / Deny buttons whose `value` is
 * the approval id. Once decided, the same message without buttons, saying who decided, from
 * where and when.
 */
import { approvalProgress, type Approval, type ApprovalIncident, type ApprovalSpecialist } from '@bosun/contract';
import type { SlackBlock } from './slack-api.js';
import { approvalCommands } from './slack.js';

/** The `action_id` of the Approve button. */
export const APPROVE_ACTION = 'bosun.approve';
/** The `action_id` of the Deny button. */
export const DENY_ACTION = 'bosun.deny';
/** The `block_id` of the buttons' actions block. */
export const ACTIONS_BLOCK = 'bosun.approval.actions';

/** Slack's limits: a section's text, a header's text, blocks per message. */
const SECTION_CHARS = 3000;
const HEADER_CHARS = 150;
/** Calls shown one by one; the rest are counted (a message holds at most 50 blocks). */
const MAX_CALLS = 20;
/** The run so far in the message: specialists and earlier steps shown (the latest), and each line's length. */
export const SLACK_CONTEXT = { specialists: 10, steps: 5, line: 250 } as const;

/** Escapes Slack's three control characters. */
export function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** `text` cut to `max` characters, with an ellipsis saying so. */
function cut(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** A mrkdwn section. */
function section(text: string): SlackBlock {
  return { type: 'section', text: { type: 'mrkdwn', text: cut(text, SECTION_CHARS) } };
}

/** Text inside a ``` block: a fence in the text would end it early, so it is broken with a zero-width space. */
function fenced(text: string, max: number): string {
  return '```' + cut(esc(text).replace(/```/g, '`\u200b``'), max) + '```';
}

/** The incident and run fields of the message. */
function facts(approval: Approval, incident: ApprovalIncident | undefined): SlackBlock {
  const field = (name: string, value: string) => ({ type: 'mrkdwn', text: cut(`*${name}*\n${value}`, 2000) });
  const fields = incident
    ? [
        field('Incident', `\`${esc(incident.id)}\` ${esc(incident.title)}`),
        field('Severity', esc(incident.severity)),
        field('Service', esc(incident.service ?? '(none given)')),
        field('Source', `${esc(incident.source)} (${esc(incident.reason)})`),
      ]
    : [field('Incident', `\`${esc(approval.incidentId)}\``)];
  fields.push(
    field('Run', `\`${esc(approval.runId)}\`, agent ${esc(approval.agent)}`),
    field('Times out', `${esc(approval.timeoutAt)} (then denied)`),
    field('Approvals', progressText(approval)),
  );
  return { type: 'section', fields };
}

/** `1 of 2 (alice); not carol`: how far it has got, and whom a rule excludes. */
function progressText(approval: Approval): string {
  const votes = approval.votes ?? [];
  const who = votes.length > 0 ? ` (${votes.map((v) => esc(v.actor.name)).join(', ')})` : '';
  const not = approval.rule?.distinctFrom === 'requester' ? `; not ${esc(approval.requester ?? 'the requester')}` : '';
  return `${approvalProgress(approval).text}${who}${not}`;
}

/** One line of the run so far, on one line and cut. */
function contextLine(text: string): string {
  return esc(cut(text.replace(/\s+/g, ' ').trim(), SLACK_CONTEXT.line));
}

/** The run so far: the other specialists and their last findings, then the asking agent's latest earlier steps. */
function runSoFar(approval: Approval, specialists: readonly ApprovalSpecialist[] | undefined): SlackBlock[] {
  const blocks: SlackBlock[] = [];
  const others = (specialists ?? []).slice(-SLACK_CONTEXT.specialists);
  if (others.length > 0)
    blocks.push(
      section(
        `*The run so far: other specialists*\n${others
          .map((s) => `• *${esc(s.agent)}* ${esc(s.status)}${s.finding ? `: ${contextLine(s.finding)}` : ''}`)
          .join('\n')}`,
      ),
    );
  const steps = (approval.steps ?? []).slice(-SLACK_CONTEXT.steps);
  if (steps.length > 0) {
    const skipped = (approval.steps ?? []).length - steps.length;
    const lines = steps.map(
      (st) => `• \`${esc(st.tool)}\` ${contextLine(JSON.stringify(st.args))} → ${st.isError ? '_error:_ ' : ''}${contextLine(st.result)}`,
    );
    blocks.push(
      section(
        `*Earlier steps of ${esc(approval.agent)}*${skipped > 0 ? ` (the latest ${steps.length} of ${steps.length + skipped})` : ''}\n${lines.join('\n')}`,
      ),
    );
  }
  return blocks;
}

/** The blocks every version of the message shares: what is asked and why. */
function asked(approval: Approval, incident: ApprovalIncident | undefined, specialists?: readonly ApprovalSpecialist[]): SlackBlock[] {
  const calls = approval.calls.filter((c) => c.needsApproval);
  const tools = [...new Set(calls.map((c) => c.tool))].join(', ');
  const blocks: SlackBlock[] = [
    { type: 'header', text: { type: 'plain_text', text: cut(`Approval needed: ${tools}`, HEADER_CHARS), emoji: true } },
    facts(approval, incident),
  ];
  if (approval.reason.trim() !== '') blocks.push(section(`*The agent's reason*\n${fenced(approval.reason.trim(), 2800)}`));
  if (incident && incident.summary.trim() !== '') blocks.push(section(`*Evidence (the alert)*\n${fenced(incident.summary.trim(), 2800)}`));
  blocks.push(...runSoFar(approval, specialists));
  for (const c of calls.slice(0, MAX_CALLS))
    blocks.push(section(`*Call ${c.index}:* \`${esc(c.tool)}\`\n${fenced(JSON.stringify(c.args, null, 2), 2800)}`));
  if (calls.length > MAX_CALLS) blocks.push(section(`_… and ${calls.length - MAX_CALLS} more calls: see \`npx bosun approvals\`_`));
  const others = approval.calls.length - calls.length;
  if (others > 0) blocks.push(section(`_${others} other call(s) of the same turn need no approval and run either way._`));
  return blocks;
}

/** The text Slack shows in notifications and where blocks cannot be shown. */
export function approvalFallbackText(approval: Approval, incident: ApprovalIncident | undefined): string {
  const tools = [...new Set(approval.calls.filter((c) => c.needsApproval).map((c) => c.tool))].join(', ');
  const about = incident ? `${incident.severity} incident ${incident.id}: ${incident.title}` : `incident ${approval.incidentId}`;
  return cut(`Approval needed (${tools}) — ${about}`, 3000);
}

/** The message of a pending approval, with its Approve / Deny buttons; `specialists`: the run's others, when read. */
export function approvalBlocks(
  approval: Approval,
  incident: ApprovalIncident | undefined,
  specialists?: readonly ApprovalSpecialist[],
): SlackBlock[] {
  const commands = approvalCommands(approval.id);
  const confirm = (verb: string) => ({
    title: { type: 'plain_text', text: `${verb}?` },
    text: { type: 'mrkdwn', text: cut(`${verb} the calls of approval \`${esc(approval.id)}\`? This is recorded under your name.`, 300) },
    confirm: { type: 'plain_text', text: verb },
    deny: { type: 'plain_text', text: 'Back' },
  });
  return [
    ...asked(approval, incident, specialists),
    {
      type: 'actions',
      block_id: ACTIONS_BLOCK,
      elements: [
        {
          type: 'button',
          action_id: APPROVE_ACTION,
          value: approval.id,
          style: 'primary',
          text: { type: 'plain_text', text: 'Approve' },
          confirm: confirm('Approve'),
        },
        {
          type: 'button',
          action_id: DENY_ACTION,
          value: approval.id,
          style: 'danger',
          text: { type: 'plain_text', text: 'Deny' },
          confirm: confirm('Deny'),
        },
      ],
    },
    { type: 'context', elements: [{ type: 'mrkdwn', text: cut(`Approval \`${esc(approval.id)}\` · or: \`${commands.approve}\``, 2000) }] },
  ];
}

/** Who decided, as the updated message says it. */
export interface DecidedBy {
  /** The operator's name. */
  name: string;
  /** Where the decision came from: `slack`, `cli`, `http`, … */
  path: string;
  /** The Slack user, when decided in Slack. */
  slackUserId?: string;
}

/** The message once decided: no buttons, and who decided, from where and when. */
export function decidedBlocks(approval: Approval, incident: ApprovalIncident | undefined, by: DecidedBy): SlackBlock[] {
  const approved = approval.status === 'approved';
  const where = by.path === 'slack' && by.slackUserId ? `in Slack (<@${by.slackUserId}>)` : `via ${esc(by.path)}`;
  const what = approved
    ? `:white_check_mark: *Approved* (call${(approval.approved ?? []).length === 1 ? '' : 's'} ${(approval.approved ?? []).join(', ')})`
    : `:no_entry: *Denied*${approval.denyReason ? `: ${esc(approval.denyReason)}` : ''}`;
  return [...asked(approval, incident), section(`${what} by *${esc(by.name)}* ${where} at ${esc(approval.decidedAt ?? '')}`)];
}

/** The fallback text of a decided approval's message. */
export function decidedText(approval: Approval, by: DecidedBy): string {
  return `Approval ${approval.id} ${approval.status} by ${by.name} (${by.path}) at ${approval.decidedAt ?? ''}`;
}
