/**
 * Who is asking: a token resolved to a person of the config's `operators` (verified, with their
 * roles), or the shared operator token of a small setup (unverified: the name is whatever the
 * caller says, and it holds every role). Every decision path — the operator HTTP API, the CLI,
 * the console's token login, A2A operator tokens — resolves its caller here and checks the role
 * with {@link requireRole}, so the check is written once.
 */
import { BosunError, ROLES, sameSecret, sha256, type Actor, type DecisionPath, type Role } from '@bosun/contract';
import type { OperatorEntry } from '@bosun/config';

/** A resolved caller: the actor as a decision records it, and what they may do. */
export interface Identity {
  actor: Actor;
  roles: readonly Role[];
}

/** Refused for want of a role: HTTP 403, CLI exit 3. */
export class ForbiddenError extends BosunError {
  declare readonly code: 'forbidden';
  readonly role: Role;
  constructor(role: Role, message: string) {
    super('forbidden', message, { data: { role } });
    this.name = 'ForbiddenError';
    this.role = role;
  }
}

/**
 * Throws a {@link ForbiddenError} unless `identity` holds `role`; `what` says what needed it
 * (`deciding approval ap-1`).
 */
export function requireRole(identity: Identity, role: Role, what: string): void {
  if (identity.roles.includes(role)) return;
  throw new ForbiddenError(
    role,
    `${identity.actor.name} may not do this: ${what} needs the "${role}" role (${identity.actor.name} has: ${identity.roles.join(', ') || 'none'})`,
  );
}

/** Options of {@link OperatorDirectory}. */
export interface OperatorDirectoryOptions {
  /** The config's `operators`. */
  operators: readonly OperatorEntry[];
  /** The shared operator token of this path (never logged), and the name its callers get when they give none. */
  shared?: { token: string; name: string };
}

/** The people of the config, looked up by token (in constant time per entry) or by name. */
export class OperatorDirectory {
  private readonly entries: { hash: Buffer; operator: OperatorEntry }[];
  private readonly shared: { hash: Buffer; name: string } | undefined;

  constructor(options: OperatorDirectoryOptions) {
    this.entries = options.operators.map((o) => ({ hash: Buffer.from(o.tokenSha256, 'hex'), operator: o }));
    this.shared =
      options.shared && options.shared.token !== '' ? { hash: sha256(options.shared.token), name: options.shared.name } : undefined;
  }

  /** Whether the config names its operators (then a per-person token identifies each caller). */
  get named(): boolean {
    return this.entries.length > 0;
  }

  /**
   * The identity of a presented token on `path`, or null when it is neither a person's token nor
   * the shared one. `address` is the client's address as the service saw it.
   */
  resolve(token: string, path: DecisionPath, address?: string): Identity | null {
    const given = sha256(token);
    let found: OperatorEntry | undefined;
    // Every hash is compared, so the time does not tell which entry matched.
    for (const e of this.entries) if (sameSecret(given, e.hash) && !found) found = e.operator;
    if (found) return identityOf(found, path, address);
    if (this.shared && sameSecret(given, this.shared.hash)) return sharedIdentity(this.shared.name, path, address);
    return null;
  }

  /** The operator named `name` (case-insensitive), or undefined. */
  byName(name: string): OperatorEntry | undefined {
    const lower = name.toLowerCase();
    return this.entries.find((e) => e.operator.name.toLowerCase() === lower)?.operator;
  }
}

/** The verified identity of a person of the config on `path`. */
export function identityOf(operator: OperatorEntry, path: DecisionPath, address?: string): Identity {
  return { actor: { name: operator.name, verified: true, path, ...(address ? { address } : {}) }, roles: operator.roles };
}

/**
 * The identity of a caller with the shared token: unverified, named `name` (the caller's `by`
 * may rename it, see `parseDecision`), holding every role — a small setup has one operator.
 */
export function sharedIdentity(name: string, path: DecisionPath, address?: string): Identity {
  return { actor: { name, verified: false, path, ...(address ? { address } : {}) }, roles: ROLES };
}
