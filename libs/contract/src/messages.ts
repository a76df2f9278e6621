import { z } from 'zod';

/** A tool call of a model turn as stored in a checkpoint (the models' `ToolCall`). */
const StoredToolCall = z.object({
  id: z.string(),
  name: z.string(),
  args: z.record(z.string(), z.unknown()),
  signature: z.string().optional(),
  /** What was wrong with arguments that did not parse (then `args` is `{}`). */
  argsError: z.string().optional(),
  /** The arguments as the model sent them, when they did not parse. */
  rawArgs: z.string().optional(),
});

/**
 * A conversation turn as stored in a checkpoint (a task's, or a delegating run's): the models'
 * `Message`. Checkpoints are stored formats, not part of the v1 wire contract.
 */
/** What a model turn carried that its provider needs back (thinking blocks, `reasoning_content`): the models' `Reasoning`. */
const StoredReasoning = z.object({
  kind: z.string(),
  text: z.string(),
  signature: z.string().optional(),
  redacted: z.boolean().optional(),
});

export const MessageSchema = z.discriminatedUnion('role', [
  z.object({ role: z.literal('user'), text: z.string() }),
  z.object({
    role: z.literal('model'),
    text: z.string().optional(),
    calls: z.array(StoredToolCall).optional(),
    reasoning: z.array(StoredReasoning).optional(),
  }),
  z.object({
    role: z.literal('tool'),
    responses: z.array(
      z.object({
        id: z.string(),
        name: z.string(),
        output: z.unknown(),
        isError: z.boolean().optional(),
        /** The idempotency key of the call it answers (the context budget names it when it shortens the result). */
        key: z.string().optional(),
      }),
    ),
  }),
]);
