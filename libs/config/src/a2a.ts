import { z } from 'zod';

/** What a tenant name may be: it becomes part of Redis keys. */
export const A2A_TENANT_PATTERN = /^[a-z0-9][a-z0-9_.-]{0,63}$/;

/**
 * One caller of the A2A server. The config holds the SHA-256 of the bearer token (hex), never
 * the token: `printf %s "$TOKEN" | sha256sum`. The tenant partitions every task, context and
 * session key; `operator: true` lets the caller answer approvals (`person` names who it is).
 */
const A2aToken = z
  .object({
    sha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/i, 'must be the SHA-256 of the token, as 64 hex digits')
      .transform((h) => h.toLowerCase()),
    tenant: z
      .string()
      .regex(A2A_TENANT_PATTERN, 'must be 1 to 64 characters of a-z, 0-9, "_", "." or "-", starting with a letter or digit'),
    operator: z.boolean().default(false),
    /**
     * The operator (a name from the config's `operators`) this token belongs to: the caller's
     * answers to approvals are recorded as that person, verified, and need the person's
     * `approve` role. Without it an `operator: true` token's answers are recorded unverified.
     */
    person: z.string().min(1).optional(),
  })
  .strict();

/** How a request is answered: `message` collects the run into one reply message, `task` returns a task, `dynamic` decides by the rule. */
const RunMode = z.enum(['message', 'task', 'dynamic']);

/**
 * Run modes per kind of request: free text (`text`) or an incident DataPart (`data`). `dynamic`
 * answers with a message when the incident's `reason` is in `messageReasons` (for example
 * quick, route-only triage), with a task otherwise.
 */
const RunModes = z
  .object({
    text: RunMode.default('task'),
    data: RunMode.default('task'),
    messageReasons: z.array(z.string().min(1)).default([]),
  })
  .strict();

/**
 * The A2A server (`services/a2a`): Bosun's incident responder as an Agent2Agent agent. Off when
 * absent. Every field is described in docs/configuration.md and docs/a2a.md.
 */
export const A2aConfig = z
  .object({
    port: z.number().int().min(0).max(65535),
    host: z.string().default('127.0.0.1'),
    /** The base URL clients reach the server at, as written in the agent card; default `http://<host>:<port>`. */
    publicUrl: z.url().optional(),
    /** The agent card's name. */
    name: z.string().min(1).default('Bosun incident responder'),
    tokens: z.array(A2aToken).default([]),
    /** Requests without a token are served as tenant `anonymous` (never operators). Off by default: no token → 401. */
    allowAnonymous: z.boolean().default(false),
    /** Largest A2A message accepted (its parts, serialized), in bytes. */
    maxMessageBytes: z
      .number()
      .int()
      .positive()
      .max(512 * 1024)
      .default(64 * 1024),
    /** How long a blocking `SendMessage` waits for the run before it returns the task as it is. */
    blockingWaitMs: z.number().int().positive().default(120_000),
    runModes: RunModes.default({ text: 'task', data: 'task', messageReasons: [] }),
    /**
     * Push notifications: sent only to URLs that start with one of `allowedUrls` (no SSRF), never
     * following redirects. Off when absent (the card says so, and the methods are refused).
     */
    pushNotifications: z
      .object({
        allowedUrls: z.array(z.url().refine((u) => /^https?:\/\//.test(u), 'must be an http(s) URL')).min(1),
        timeoutMs: z.number().int().positive().max(60_000).default(5_000),
      })
      .strict()
      .optional(),
  })
  .strict();
export type A2aConfig = z.output<typeof A2aConfig>;

/**
 * A remote A2A agent as a specialist (`specialists.<name>.a2a`): the specialist worker sends it
 * the task and follows the remote task. `token` is sent as a bearer token; write it as
 * `${ENV_VAR}` (resolved by the specialist service only, never logged).
 */
export const RemoteA2aAgent = z
  .object({
    /** The agent's base URL: its card is at `<url>/.well-known/agent-card.json`. */
    url: z.url(),
    token: z.string().min(1).optional(),
    /** How often the remote task is polled when the agent does not stream. */
    pollMs: z.number().int().min(50).max(60_000).default(1_000),
  })
  .strict();
export type RemoteA2aAgent = z.output<typeof RemoteA2aAgent>;
