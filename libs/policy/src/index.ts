export {
  MAX_TOOLS_PER_REQUEST,
  toolAllowed,
  isReadOnlyTool,
  toolState,
  approvalTimeoutFor,
  specialistCaller,
  offeredTools,
  decideCall,
} from './policy.js';
export type { ToolState, PolicyTool, Caller, CallDecision } from './policy.js';
