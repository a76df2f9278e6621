// The service runs as a process (main.ts); its entry holds what a process hosting it beside the
// other services (`bosun serve`, cli/src/serve.ts) starts. Add here only what another package or
// test/ imports.
export { specialistService, type SpecialistServiceOptions } from './service.js';
// The specialist as the coordinator of its process runs it (`bosun serve`'s local tasks).
export type { LocalSpecialist } from '@bosun/agent';
