// The service runs as a process (main.ts); its entry holds what test/ imports, and what a process
// hosting it beside the other services (`bosun serve`, cli/src/serve.ts) starts.
export { ToolGateway } from './gateway.js';
export { gatewayService, startGateway, type StartedGateway } from './service.js';
