export { publishIncident } from './publish.js';
export type { Published } from './publish.js';
export { followEvents, formatEvent } from './events.js';
export type { FollowOptions } from './events.js';
