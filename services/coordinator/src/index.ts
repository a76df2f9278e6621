export { Coordinator } from './coordinator.js';
export type { CoordinatorDeps } from './coordinator.js';
