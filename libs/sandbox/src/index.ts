export { runScript, defaultSandboxPool } from './sandbox.js';
export type { RunOptions, SandboxHost, ScriptOutcome, ToolAnswer } from './types.js';
export { SandboxPool, SandboxAborted, SandboxFailure } from './pool.js';
export type { SandboxPoolOptions } from './pool.js';
export { DEFAULT_SANDBOX_LIMITS } from './limits.js';
export type { SandboxLimit, SandboxLimits } from './limits.js';
export { readTagged, RESULT_TAGS } from './tagged.js';
export type { TaggedResult } from './tagged.js';
