/** `bosun audit [--run <runId>] [--by <person>] [--limit N] [--json]`: the audit stream of mutating tool calls. */
import { auditStreamKey, parseAuditEntry, type Actor, type AuditEntry } from '@bosun/contract';
import { UsageError } from '../args.js';
import { defineRedisCommand } from '../command.js';
import { oneLine, storedProblem, type OperatorDeps } from '../operator.js';
import { printJson, printText, reportProblems } from '../terminal.js';

/** One entry of `bosun audit`: the stream entry's id and its fields (the contract's `AuditEntry`). */
export type AuditView = { id: string } & AuditEntry;

const AUDIT_PAGE = 500;

/**
 * The newest `limit` entries of the audit stream, optionally of one run, newest first; and the
 * entries that do not parse, each named with its bad fields (they are not shown).
 */
export async function readAudit(
  deps: OperatorDeps,
  options: { runId?: string; by?: string; limit?: number } = {},
): Promise<{ entries: AuditView[]; problems: string[] }> {
  const limit = options.limit ?? 50;
  const key = auditStreamKey(deps.prefix);
  const entries: AuditView[] = [];
  const problems: string[] = [];
  let end = '+';
  // Newest first, page by page, until enough entries match (a filter may skip many).
  while (entries.length < limit) {
    const count = options.runId || options.by ? AUDIT_PAGE : limit - entries.length;
    const page = await deps.redis.xrevrange(key, end, '-', 'COUNT', count);
    for (const [id, flat] of page) {
      let e: AuditEntry;
      try {
        e = parseAuditEntry(flat, `audit entry ${id}`);
      } catch (err) {
        problems.push(storedProblem(err));
        continue;
      }
      if (options.runId && e.runId !== options.runId) continue;
      if (options.by && !decidedBy(e, options.by)) continue;
      entries.push({ id, ...e });
      if (entries.length >= limit) break;
    }
    const last = page[page.length - 1];
    if (page.length < count || !last) break;
    end = `(${last[0]}`;
  }
  return { entries, problems };
}

/**
 * Whether `person` decided the entry's approval: one of its deciders (case-insensitive), or —
 * in entries written before deciders were recorded — its approver's name.
 */
export function decidedBy(e: AuditEntry, person: string): boolean {
  const p = person.toLowerCase();
  if ((e.deciders ?? []).length > 0) return e.deciders!.some((a) => a.name.toLowerCase() === p);
  return (e.approver ?? '').split(', ').some((n) => n.toLowerCase() === p);
}

/** How the entry's deciders read: `alice (verified, http 10.0.0.7)`, or the approver's name. */
function decidersText(e: AuditView): string {
  const ds = e.deciders ?? [];
  if (ds.length === 0) return e.approver ?? '?';
  const slack = (a: Actor) => (a.slack ? ` slack ${a.slack.teamId}/${a.slack.userId}` : '');
  return ds
    .map((a) => `${a.name} (${a.verified ? 'verified' : 'unverified'}, ${a.path}${a.address ? ` ${a.address}` : ''}${slack(a)})`)
    .join(', ');
}

/** The text of `bosun audit`. */
export function formatAudit(entries: AuditView[]): string {
  if (entries.length === 0) return 'no audit entries';
  const approvalOf = (e: AuditView) => (e.approvalId ? `${e.approvalId} (${decidersText(e)})` : '-');
  const w = (f: (e: AuditView) => string, min: number) => Math.max(min, ...entries.map((e) => f(e).length));
  const wRun = w((e) => e.runId, 3);
  const wAgent = w((e) => e.agent, 5);
  const wTool = w((e) => e.tool, 4);
  const wApproval = w(approvalOf, 8);
  const lines = [
    `${'at'.padEnd(24)} ${'status'.padEnd(10)} ${'run'.padEnd(wRun)} ${'agent'.padEnd(wAgent)} ${'tool'.padEnd(wTool)} ${'approval'.padEnd(wApproval)} args`,
  ];
  for (const e of entries) {
    const args = typeof e.args === 'string' ? e.args : JSON.stringify(e.args ?? {});
    lines.push(
      `${e.at.padEnd(24)} ${e.status.padEnd(10)} ${e.runId.padEnd(wRun)} ${e.agent.padEnd(wAgent)} ${e.tool.padEnd(wTool)} ${approvalOf(e).padEnd(wApproval)} ${oneLine(args, 120)}`,
    );
  }
  return lines.join('\n');
}

export const auditCommand = defineRedisCommand({
  name: 'audit',
  usage: `  bosun audit [--run <runId>] [--by <person>] [--limit N] [--json]
                                    the audit stream of mutating tool calls, newest first; --by:
                                    only calls that person approved (verified deciders)`,
  options: {
    run: { type: 'string' },
    by: { type: 'string' },
    limit: { type: 'string', default: '50' },
    json: { type: 'boolean', default: false },
  },
  positionals: 0,
  check({ values }) {
    const limit = Number(values.limit);
    if (!/^\d+$/.test(values.limit) || !Number.isSafeInteger(limit) || limit < 1)
      throw new UsageError(`audit: --limit must be a positive integer (got "${values.limit}")`);
    if (values.run !== undefined && values.run.trim() === '') throw new UsageError('audit: --run needs a run id');
    if (values.by !== undefined && values.by.trim() === '') throw new UsageError('audit: --by needs a person’s name');
    return { limit, runId: values.run, by: values.by?.trim(), json: values.json };
  },
  async handler({ limit, runId, by, json }, deps) {
    const { entries, problems } = await readAudit(deps, { limit, ...(runId ? { runId } : {}), ...(by ? { by } : {}) });
    if (json) printJson(entries);
    else printText(formatAudit(entries));
    return reportProblems(problems);
  },
});
