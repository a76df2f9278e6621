export { startIntakeServer } from './server.js';
export type { IntakeServer, IntakeServerOptions } from './server.js';
export { IntakeQueue, RedisUnavailableError } from './queue.js';
export type { Queued } from './queue.js';
export { SourceAuth, hmacHex, sameSecret } from './auth.js';
export { AlertmanagerPayload, alertmanagerBatch, alertIncidentId, groupIncidentId } from './alertmanager.js';
export { genericBatch, atPath, pathSteps, MappingError } from './generic.js';
export { severityOf, DEFAULT_SEVERITIES } from './mapping.js';
