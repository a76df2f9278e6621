export { BosunA2AHandler, callerOf } from './handler.js';
export type { HandlerDeps } from './handler.js';
export { TokenTable, Caller, ANONYMOUS_TENANT } from './auth.js';
export { buildAgentCard, JSONRPC_PATH, REST_PATH } from './card.js';
export { incidentFrom, incidentIdFor } from './intake.js';
export { taskOf, stateOf, artifactsOf, incompleteParts } from './view.js';
