export { ToolGateway, MCP_CLIENT } from './gateway.js';
export type { GatewayDeps } from './gateway.js';
export { McpServerConnection } from './mcp.js';
export type { McpCallOutcome } from './mcp.js';
export { startMcpFace, FACE_META } from './mcp-face.js';
export type { McpFace, McpFaceOptions } from './mcp-face.js';
