export {
  MAX_TOOLS_PER_REQUEST,
  toolAllowed,
  isReadOnlyTool,
  toolState,
  approvalTimeoutFor,
  approvalRuleFor,
  strictestRule,
  ruleToStore,
  specialistCaller,
  offeredTools,
  decideCall,
} from './policy.js';
export type { ToolState, PolicyTool, Caller, CallDecision, ApprovalRule } from './policy.js';
