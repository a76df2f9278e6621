// The service runs as a process (main.ts); no other package and no test imports its entry, so it
// exports nothing. Add here only what another package or test/ imports.
export {};
