// The service runs as a process (main.ts); its entry holds what a process hosting it beside the
// other services (`bosun serve`, cli/src/serve.ts) starts. Add here only what another package or
// test/ imports.
export { coordinatorService, type CoordinatorServiceOptions } from './service.js';
