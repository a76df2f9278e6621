/** `bosun ack <key> --done|--retry|--skip`: resolves an in-doubt tool call. */
import { UsageError } from '../args.js';
import { defineRedisCommand } from '../command.js';
import { TOKEN_FILE_OPTION, cliIdentity } from '../identity.js';
import { escapeControl } from '../terminal.js';
import { ackToolCall, type AckOutcome } from '../tool-calls.js';

/** Prints what `bosun ack` did and returns the exit code (1 for a retry that failed, or a dead letter that does not parse). */
function reportAck(r: AckOutcome, by: string): number {
  const note = r.deadLetterId ? `dead letter ${r.deadLetterId} annotated` : 'no in-doubt dead letter found for it';
  let code = 0;
  if (r.action === 'retry') {
    process.stderr.write(`tool call ${r.key} re-sent once as job ${r.jobId ?? '?'} (by ${by}); ${note}\n`);
    process.stdout.write(`${JSON.stringify(r.result, null, 2)}\n`);
    code = r.result.status === 'ok' ? 0 : 1;
  } else {
    process.stdout.write(
      `tool call ${r.key} resolved: ${r.action === 'done' ? 'took effect' : 'treated as not executed'} (by ${by} at ${r.resolution.at}); ${note}\n`,
    );
  }
  if (!r.deadLetterProblem) return code;
  process.stderr.write(`bosun: ${escapeControl(r.deadLetterProblem)}\n`);
  return 1;
}

export const ackCommand = defineRedisCommand({
  name: 'ack',
  usage: `  bosun ack <key> --done|--retry|--skip [--by <name>] [--token-file <f>]
                                    resolve an in-doubt tool call: it took effect (--done), treat
                                    it as not executed (--skip), or send it once more (--retry)`,
  options: {
    done: { type: 'boolean', default: false },
    retry: { type: 'boolean', default: false },
    skip: { type: 'boolean', default: false },
    by: { type: 'string' },
    ...TOKEN_FILE_OPTION,
  },
  positionals: 1,
  check({ values, positionals }, env) {
    const key = positionals[0];
    if (!key) throw new UsageError('ack needs a tool-call key (see bosun runs show, or bosun dlq list --kind in-doubt)');
    const actions = (['done', 'retry', 'skip'] as const).filter((a) => values[a]);
    const action = actions[0];
    if (actions.length !== 1 || !action) throw new UsageError('ack needs exactly one of --done, --retry, --skip');
    const typed = values.by?.trim() || env.user || 'operator';
    const who = cliIdentity(env, { role: 'retry', what: `resolving tool call ${key}`, tokenFile: values['token-file'], by: typed });
    return { key, action, by: who.actor.name };
  },
  async handler({ key, action, by }, deps) {
    return reportAck(await ackToolCall(deps, key, action, { by }), by);
  },
});
