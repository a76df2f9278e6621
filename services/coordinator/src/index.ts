export { Coordinator, parseRouting } from './coordinator.js';
export type { CoordinatorDeps } from './coordinator.js';
