/** The command table of `bosun`, in the order of its help text, and that help text. */
import type { Command } from '../command.js';
import { ackCommand } from './ack.js';
import { approvalsCommand, approveCommand, denyCommand } from './approvals.js';
import { auditCommand } from './audit.js';
import { demoCommand } from './demo.js';
import { dlqCommand } from './dlq.js';
import { publishCommand } from './publish.js';
import { resultCommand } from './result.js';
import { serveCommand } from './serve.js';
import { cancelCommand, runsCommand } from './runs.js';
import { statsCommand } from './stats.js';
import { watchCommand } from './watch.js';

/** Every command, in the order `bosun --help` lists them. */
const TABLE: readonly Command[] = [
  publishCommand,
  watchCommand,
  resultCommand,
  dlqCommand,
  runsCommand,
  cancelCommand,
  ackCommand,
  statsCommand,
  approvalsCommand,
  approveCommand,
  denyCommand,
  auditCommand,
  demoCommand,
  serveCommand,
];

/** The commands by name (the first word of `bosun <command> …`). */
export const COMMANDS: ReadonlyMap<string, Command> = new Map(TABLE.map((c) => [c.name, c]));

/** `bosun --help`: the commands' usage between a header and the environment and exit codes. */
export const USAGE = `bosun — operate a Bosun cluster

Usage:
${TABLE.map((c) => c.usage).join('\n')}

Environment: REDIS_URL, NATS_URL, BOSUN_PREFIX, BOSUN_CONFIG; TLS and credentials: REDIS_TLS_*_FILE,
REDIS_USERNAME, REDIS_PASSWORD_FILE, NATS_TLS_*_FILE, NATS_USER, NATS_PASSWORD_FILE, NATS_TOKEN_FILE,
NATS_NKEY_SEED_FILE, NATS_CREDS_FILE (see docs/configuration.md).
Exit codes: 0 ok, 1 failure, 2 bad input or usage, 3 not finished yet.`;
