// The service runs as a process (main.ts); its entry holds only what test/ imports.
export { SlackApi, SlackApiError } from './slack-api.js';
