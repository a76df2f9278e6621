export { Coordinator, parseRouting, TIMERS_QUEUE } from './coordinator.js';
export type { CoordinatorDeps } from './coordinator.js';
