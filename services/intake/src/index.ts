export { startIntakeServer } from './server.js';
export type { IntakeServer, IntakeServerOptions } from './server.js';
export { IntakeQueue, RedisUnavailableError } from './queue.js';
export type { Queued } from './queue.js';
export { SourceAuth, hmacHex } from './auth.js';
export { AlertmanagerPayload, alertmanagerBatch, alertIncidentId, groupIncidentId } from './alertmanager.js';
export { genericBatch, atPath, pathSteps, MappingError } from './generic.js';
export { severityOf, DEFAULT_SEVERITIES } from './mapping.js';
export { DeliveryProcessor, startDeliveryWorker } from './delivery-worker.js';
export type { DeliveryWorkerOptions } from './delivery-worker.js';
export {
  deliveryRequest,
  signatureHeader,
  approvalCommands,
  send,
  DeliveryError,
  SIGNATURE_HEADER,
  IDEMPOTENCY_HEADER,
} from './deliver.js';
export type { Deliverable } from './deliver.js';
export { slackText, approvalText, notChecked } from './slack.js';
export { ApprovalAnnouncer } from './approval-announcer.js';
export { IntakeFlow, groupBatch, groupValues } from './flow.js';
export { loadRunbooks, matchRunbook, withRunbook } from './runbooks.js';
export { SlackApi, SlackApiError } from './slack-api.js';
export type { SlackApiOptions, SlackBlock } from './slack-api.js';
export {
  slackSignature,
  verifySlackRequest,
  SLACK_SIGNATURE_HEADER,
  SLACK_TIMESTAMP_HEADER,
  SLACK_TOLERANCE_SECONDS,
} from './slack-signature.js';
export type { SlackVerification } from './slack-signature.js';
export { approvalBlocks, decidedBlocks, approvalFallbackText, APPROVE_ACTION, DENY_ACTION, ACTIONS_BLOCK } from './slack-blocks.js';
export type { DecidedBy } from './slack-blocks.js';
export { SlackInteractions, SLACK_INTERACTIONS_PATH, slackRoleCheck } from './slack-interactions.js';
export type { SlackInteractionsOptions } from './slack-interactions.js';
export { approvalIncident } from './approval-announcer.js';
