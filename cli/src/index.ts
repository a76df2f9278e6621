export { publishIncident, publishOrReplace } from './publish.js';
export type { Published, PublishOutcome } from './publish.js';
export { followEvents, formatEvent } from './events.js';
export type { FollowOptions } from './events.js';
