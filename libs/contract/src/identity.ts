import { z } from 'zod';

/*
 * Who decides. Every decision path — the CLI, the operator HTTP API, the console, Slack, an A2A
 * operator token — resolves the person behind a request to one {@link Actor} before it calls
 * `ApprovalStore.decide`, and the decision record keeps it. `verified` says whether the name came
 * from a credential Bosun checked (a per-person token, an OIDC ID token, a Slack user mapped to an
 * operator) or only from what the caller typed (`--by`, the shared operator token).
 */

/** The path a decision came by. */
export const DecisionPath = z.enum(['cli', 'http', 'console', 'slack', 'a2a']);
export type DecisionPath = z.infer<typeof DecisionPath>;

/** What a person may do: decide approvals, cancel runs, retry in-doubt calls, read. */
export const Role = z.enum(['approve', 'cancel', 'retry', 'read']);
export type Role = z.infer<typeof Role>;

/** Every role, in the order the docs list them. */
export const ROLES: readonly Role[] = Role.options;

/** Limits of an actor's free-text fields, in characters. */
export const ACTOR_LIMITS = { name: 200, note: 200 } as const;

/** The person behind a decision, as the path that received it resolved them. */
export const Actor = z.object({
  /** The operator's name (from the config, the ID token, or — unverified — what the caller typed). */
  name: z.string().min(1).max(ACTOR_LIMITS.name),
  /** True when `name` comes from a credential Bosun checked; false for `--by` or the shared token. */
  verified: z.boolean(),
  path: DecisionPath,
  /** The OIDC subject, for a console login through OpenID Connect. */
  sub: z.string().optional(),
  email: z.string().optional(),
  /** The client's address as the receiving service saw it. */
  address: z.string().optional(),
  /** For a decision from Slack: the workspace and the user who clicked. */
  slack: z.object({ teamId: z.string(), userId: z.string() }).optional(),
  /** What the caller said beside a verified identity (a `--by` given with a per-person token): never trusted. */
  note: z.string().max(ACTOR_LIMITS.note).optional(),
});
export type Actor = z.infer<typeof Actor>;

/** How an actor reads in a message or an audit line: `alice (verified, slack)`. */
export function describeActor(actor: Pick<Actor, 'name' | 'verified' | 'path'>): string {
  return `${actor.name} (${actor.verified ? 'verified' : 'unverified'}, ${actor.path})`;
}
