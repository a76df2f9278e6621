/** The limits of one script run. Every one is per script (one model turn). */
export interface SandboxLimits {
  /** Time the script may spend running, in ms; time waiting for a tool is not counted (tools have their own timeout). */
  timeMs: number;
  /** Memory of the interpreter, in bytes. */
  memoryBytes: number;
  /** Stack of the interpreter, in bytes (deep recursion ends with a stack overflow). */
  stackBytes: number;
  /** `call_tool`s per script. */
  maxToolCalls: number;
  /** Size of the tagged result, as JSON, in characters. */
  maxOutputChars: number;
  /** Size of everything the script writes with `console.log` (and friends), in characters. */
  maxConsoleChars: number;
}

/** The default limits (docs/codeact.md). */
export const DEFAULT_SANDBOX_LIMITS: Readonly<SandboxLimits> = {
  timeMs: 5_000,
  memoryBytes: 64 * 1024 * 1024,
  stackBytes: 128 * 1024,
  maxToolCalls: 50,
  maxOutputChars: 256 * 1024,
  maxConsoleChars: 64 * 1024,
};

/** Which limit a script reached. */
export type SandboxLimit = 'time' | 'memory' | 'stack' | 'tool_calls' | 'output' | 'console';

/** The message of the time limit (the same whether the interpreter or the pool stopped the script). */
export function timeLimitMessage(timeMs: number): string {
  return `the script ran for more than ${timeMs} ms (time limit); it was stopped`;
}
