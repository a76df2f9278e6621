export { runScript, sandboxModules } from './sandbox.js';
export type { SandboxHost, ScriptOutcome, ToolAnswer } from './sandbox.js';
export { DEFAULT_SANDBOX_LIMITS } from './limits.js';
export type { SandboxLimit, SandboxLimits } from './limits.js';
export { readTagged, RESULT_TAGS } from './tagged.js';
export type { TaggedResult } from './tagged.js';
