/**
 * Who runs a CLI command that decides (`bosun approve`, `deny`, `cancel`, `ack`): the person whose
 * token is in `BOSUN_TOKEN` (or the file of `--token-file`), looked up among the config's
 * `operators` — verified, with their roles — or, when the config names no operators, whoever
 * `--by` (default `$USER`) says, unverified. A cluster that names its operators refuses a
 * deciding command without a known token: exit 4, as HTTP's 401/403.
 */
import { readFileSync } from 'node:fs';
import { loadClusterConfig, type BosunEnv, type OperatorEntry } from '@bosun/config';
import type { Role } from '@bosun/contract';
import { ForbiddenError, OperatorDirectory, requireRole, sharedIdentity, type Identity } from '@bosun/transport';
import { OperatorError } from './operator.js';

/** The `--token-file` option of the deciding commands. */
export const TOKEN_FILE_OPTION = { 'token-file': { type: 'string' } } as const;

/** The token from `--token-file` (its first line), else `BOSUN_TOKEN`. */
function presentedToken(env: BosunEnv, tokenFile: string | undefined): string | undefined {
  if (tokenFile === undefined) return env.operatorToken;
  let text: string;
  try {
    text = readFileSync(tokenFile, 'utf8');
  } catch (err) {
    throw new OperatorError(
      'bad_request',
      `--token-file: cannot read ${tokenFile} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
      err,
    );
  }
  const token = text.split('\n')[0]!.trim();
  if (token === '') throw new OperatorError('bad_request', `--token-file: ${tokenFile} is empty`);
  return token;
}

/** The config's operators (the config file of BOSUN_CONFIG). */
function configuredOperators(env: BosunEnv): readonly OperatorEntry[] {
  return loadClusterConfig(env.configFile, { resolveServers: false, resolveOperatorToken: false }).operators;
}

/** Options of {@link cliIdentity}. */
export interface CliIdentityOptions {
  /** The role the command needs, and what needs it (for the refusal). */
  role: Role;
  what: string;
  /** `--token-file`, when given. */
  tokenFile?: string | undefined;
  /** The name of an unverified caller (`--by`, else `$USER`). */
  by: string;
}

/**
 * The caller of a deciding command, checked for its role; refusals are {@link OperatorError}s
 * with exit 4 naming what is missing.
 */
export function cliIdentity(env: BosunEnv, options: CliIdentityOptions, operators = configuredOperators(env)): Identity {
  const directory = new OperatorDirectory({ operators });
  const token = presentedToken(env, options.tokenFile);
  if (token === undefined) {
    if (directory.named)
      throw new OperatorError(
        'forbidden',
        `${options.what}: this cluster names its operators (${env.configFile}): set BOSUN_TOKEN (or --token-file) to your own token`,
      );
    return sharedIdentity(options.by, 'cli');
  }
  if (!directory.named)
    throw new OperatorError(
      'forbidden',
      `${options.what}: a token is given (BOSUN_TOKEN or --token-file) but ${env.configFile} names no operators`,
    );
  const identity = directory.resolve(token, 'cli');
  if (!identity) throw new OperatorError('forbidden', `${options.what}: the token is not the token of any operator in ${env.configFile}`);
  try {
    requireRole(identity, options.role, options.what);
  } catch (err) {
    if (err instanceof ForbiddenError) throw new OperatorError('forbidden', err.message, err);
    throw err;
  }
  return identity;
}

/**
 * Who reads an approval (`bosun approvals show`), to record them as a viewer: the operator whose
 * token is presented, checked for the `read` role; undefined without a token or when the config
 * names no operators (a name nobody checked is not recorded). A token that is nobody's is refused
 * (exit 4), as for a deciding command.
 */
export function cliViewer(
  env: BosunEnv,
  tokenFile: string | undefined,
  what: string,
  operators?: readonly OperatorEntry[],
): Identity | undefined {
  // Without a token the config is not read: reading needs none, and needs no config either.
  if (presentedToken(env, tokenFile) === undefined) return undefined;
  const people = operators ?? configuredOperators(env);
  if (!new OperatorDirectory({ operators: people }).named) return undefined;
  return cliIdentity(env, { role: 'read', what, tokenFile, by: '' }, people);
}
