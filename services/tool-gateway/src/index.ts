// The service runs as a process (main.ts); its entry holds only what test/ imports.
export { ToolGateway } from './gateway.js';
