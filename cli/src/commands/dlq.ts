/** `bosun dlq [list|show|retry|drop]`: the dead-letter queue, the operators' inbox. */
import { DeadLetterKind } from '@bosun/contract';
import { UsageError } from '../args.js';
import { commandGroup, defineRedisCommand } from '../command.js';
import {
  dropDeadLetter,
  listDeadLetters,
  retryDeadLetter,
  showDeadLetter,
  type DeadLetterSummary,
  type RetryOutcome,
} from '../dead-letters.js';
import { OperatorError } from '../operator.js';
import { escapeControl, printJson, printText, reportProblems } from '../terminal.js';

/** The text of `bosun dlq list`. */
export function formatDeadLetters(entries: DeadLetterSummary[]): string {
  if (entries.length === 0) return 'dead-letter queue is empty';
  const w = Math.max(2, ...entries.map((e) => e.id.length));
  const lines = [
    `${'id'.padEnd(w)}  ${'at'.padEnd(24)} ${'kind'.padEnd(9)} ${'run'.padEnd(21)} ${'agent'.padEnd(12)} ${'mark'.padEnd(8)} reason`,
  ];
  for (const e of entries) {
    lines.push(
      `${e.id.padEnd(w)}  ${e.at.padEnd(24)} ${e.kind.padEnd(9)} ${(e.runId ?? '-').padEnd(21)} ${(e.agent ?? '-').padEnd(12)} ${(e.marker ?? '-').padEnd(8)} ${e.reason}`,
    );
  }
  return lines.join('\n');
}

const list = defineRedisCommand({
  name: 'list',
  label: 'dlq',
  usage: `  bosun dlq [list] [--json] [--kind <kind>]
                                    list the dead-letter queue, newest first`,
  options: { json: { type: 'boolean', default: false }, kind: { type: 'string' } },
  positionals: 0,
  check({ values }) {
    const kind = values.kind;
    if (kind !== undefined && !DeadLetterKind.safeParse(kind).success) {
      throw new UsageError(`dlq list: --kind must be one of ${DeadLetterKind.options.join(', ')}`);
    }
    return { json: values.json, kind };
  },
  async handler({ json, kind }, deps) {
    const { entries, problems } = await listDeadLetters(deps, kind ? { kind } : {});
    if (json) printJson(entries.map((e) => e.entry));
    else printText(formatDeadLetters(entries));
    return reportProblems(problems);
  },
});

/** The `<jobId>` argument of show, retry and drop. */
function entryId(sub: string, positionals: string[]): string {
  const id = positionals[0];
  if (!id) throw new UsageError(`dlq ${sub} needs a dead-letter job id (see bosun dlq list)`);
  return id;
}

const show = defineRedisCommand({
  name: 'show',
  label: 'dlq',
  usage: '  bosun dlq show <jobId>            print one dead-letter entry (JSON)',
  options: {},
  positionals: 1,
  check: ({ positionals }) => entryId('show', positionals),
  async handler(id, deps) {
    const shown = await showDeadLetter(deps, id);
    if (!shown) throw new OperatorError('not_found', `no dead-letter entry ${id} under BOSUN_PREFIX=${deps.prefix}`);
    if ('entry' in shown) {
      printJson(shown.entry);
      return 0;
    }
    // What is stored, as it is, so that it can be looked at (and dropped).
    printJson({ id: shown.id, data: shown.stored });
    return reportProblems([shown.problem]);
  },
});

/** What `bosun dlq retry` says on stderr (the run id goes to stdout). */
function reportRetry(id: string, r: RetryOutcome): void {
  if (r.note) process.stderr.write(`note: ${escapeControl(r.note)}\n`);
  if (r.previous) process.stderr.write(`note: entry ${id} was already retried as ${r.previous.incidentId} (run ${r.previous.runId})\n`);
  if (r.deliveryJobId)
    process.stderr.write(
      `delivering the answer of run ${r.runId} again as ${r.deliveryJobId}; entry ${id} is linked to it (retriedAs) and stays in the queue\n`,
    );
  else if (r.taskId)
    process.stderr.write(
      `retrying ${r.taskId} inside the open run ${r.runId}; entry ${id} is linked to it (retriedAs) and stays in the queue\n`,
    );
  else
    process.stderr.write(
      `re-running incident ${r.originalIncidentId} as ${r.incidentId}; entry ${id} is linked to it (retriedAs) and stays in the queue\n`,
    );
}

const retry = defineRedisCommand({
  name: 'retry',
  label: 'dlq',
  usage: `  bosun dlq retry <jobId>           re-runs the work of a stall/timeout/failure entry: the one
                                    specialist task inside its run if the run is still open, else
                                    the incident as a new incident <id>-retry<n>; prints the run id
                                    (the entry stays, linked to it). Poison input must be fixed and
                                    published with bosun publish; in-doubt calls: bosun ack. A
                                    delivery entry is delivered again (same idempotency key)`,
  options: {},
  positionals: 1,
  check: ({ positionals }) => entryId('retry', positionals),
  async handler(id, deps) {
    const r = await retryDeadLetter(deps, id);
    reportRetry(id, r);
    process.stdout.write(`${r.runId}\n`);
    return 0;
  },
});

const drop = defineRedisCommand({
  name: 'drop',
  label: 'dlq',
  usage: '  bosun dlq drop <jobId>            remove one entry (the only way an entry leaves the queue)',
  options: {},
  positionals: 1,
  check: ({ positionals }) => entryId('drop', positionals),
  async handler(id, deps) {
    await dropDeadLetter(deps, id);
    process.stderr.write(`dropped dead-letter entry ${id}\n`);
    return 0;
  },
});

/** `bosun dlq`: list (the default), show, retry, drop. */
export const dlqCommand = commandGroup('dlq', [list, show, retry, drop], 'list');
