export { specialistProcessor } from './specialist.js';
export type { SpecialistDeps } from './specialist.js';
