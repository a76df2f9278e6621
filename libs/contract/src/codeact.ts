import { z } from 'zod';

/** Any JSON value (checked where it is produced). */
const jsonValue: z.ZodType<unknown> = z.unknown();

/*
 * The CodeAct journal: what the script of the model turn under way has seen, kept in the task
 * checkpoint (`codeact`) and saved before each of its effects. A script run again after a crash
 * or a park replays against it: each `call_tool` already in the journal is answered from it (or,
 * sent but unanswered, sent again under the same idempotency key, which the gateway answers from
 * its record), and `Date.now()`, `new Date()` and `Math.random()` give the recorded values.
 * Internal, like the rest of the task checkpoint.
 */

/** What a `call_tool` answered the script: its result, or the error the script saw. */
export const CodeActAnswer = z.union([z.object({ ok: jsonValue }).strict(), z.object({ error: z.string() }).strict()]);
export type CodeActAnswer = z.infer<typeof CodeActAnswer>;

/** One `call_tool` of the script, at its position: the call as asked, and its answer once it has one. */
export const CodeActCall = z.object({
  /** The idempotency key: `<taskId>-s<step>-c<i>`, i the call's position in the script (from 0). */
  key: z.string(),
  tool: z.string(),
  /** The real arguments (events and approvals show them redacted). */
  args: z.record(z.string(), jsonValue),
  /** Absent while the call is under way (sent, or waiting for an approval). */
  answer: CodeActAnswer.optional(),
});
export type CodeActCall = z.infer<typeof CodeActCall>;

/** The journal of one script: the model turn it belongs to, the script, its calls and the host values it read. */
export const CodeActJournal = z.object({
  step: z.number().int().positive(),
  script: z.string(),
  calls: z.array(CodeActCall),
  /** Values of `Date.now()` / `new Date()`, in the order the script read them. */
  clock: z.array(z.number()),
  /** Values of `Math.random()`, in the order the script read them. */
  random: z.array(z.number()),
  /** How many times the script was run again from the journal. */
  replays: z.number().int().nonnegative().default(0),
});
export type CodeActJournal = z.infer<typeof CodeActJournal>;
