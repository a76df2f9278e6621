// The layering rules of the workspace, checked by `npm run lint` (dependency-cruiser).
// Packages are reached through their names (`@bosun/x`), which resolve to their built entry
// (`<package>/dist/index.js`); the rules below are written on those resolved paths.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'contract-imports-nothing-of-ours',
      comment: 'libs/contract is the wire contract: every other package depends on it, it depends on none of ours.',
      severity: 'error',
      from: { path: '^libs/contract/' },
      to: { path: '^(libs/(?!contract/)|services/|cli/|bench/|mcp-servers/)' },
    },
    {
      name: 'libs-import-no-service',
      comment: 'A lib is used by services; it never reaches into one (nor into the CLI or the bench).',
      severity: 'error',
      from: { path: '^libs/' },
      to: { path: '^(services|cli|bench)/' },
    },
    {
      name: 'no-service-imports-another',
      comment: 'Services talk over queues and NATS, never by importing each other.',
      severity: 'error',
      from: { path: '^services/([^/]+)/' },
      to: { path: '^services/', pathNot: '^services/$1/' },
    },
    {
      name: 'cli-and-bench-use-public-entries',
      comment: "The CLI and the bench reach a service or a lib only through its package's public entry (dist/index.js).",
      severity: 'error',
      from: { path: '^(cli|bench)/' },
      to: { path: '^(services|libs)/[^/]+/', pathNot: '^(services|libs)/[^/]+/dist/index\\.(js|d\\.ts)$' },
    },
    {
      name: 'no-reaching-into-another-package',
      comment: "No import into another package's src/ or into its dist/ past the entry.",
      severity: 'error',
      from: { path: '^(libs|services)/([^/]+)/' },
      // Besides the entries: the contract's errors alone (`@bosun/contract/errors`, no zod), for a
      // sandbox thread that must start light.
      to: {
        path: '^(libs|services)/[^/]+/',
        pathNot: ['^$1/$2/', '^(libs|services)/[^/]+/dist/index\\.(js|d\\.ts)$', '^libs/contract/dist/errors\\.(js|d\\.ts)$'],
      },
    },
    {
      name: 'libs-layering',
      comment:
        'The libs form layers (contract < config, models < policy < transport < agent): a lower lib never imports a higher one, so no cycle can form between packages (whose dist/ is not followed).',
      severity: 'error',
      from: { path: '^libs/(config|models)/' },
      to: { path: '^libs/(models|config|policy|transport|agent)/', pathNot: '^libs/$1/' },
    },
    {
      name: 'libs-layering-policy',
      comment:
        'libs/policy decides on tools from the parsed config: it sits above contract and config, below transport and the agent loops, and knows nothing of models.',
      severity: 'error',
      from: { path: '^libs/policy/' },
      to: { path: '^libs/(models|transport|agent)/' },
    },
    {
      name: 'libs-layering-transport',
      comment: 'libs/transport sits below the agent loops and knows nothing of models.',
      severity: 'error',
      from: { path: '^libs/transport/' },
      to: { path: '^libs/(models|agent)/' },
    },
    {
      name: 'libs-layering-agent',
      comment:
        'libs/agent declares the ports its loops use (libs/agent/src/ports.ts); libs/transport implements them and the services hand the implementations in, so the loops never import transport.',
      severity: 'error',
      from: { path: '^libs/agent/' },
      to: { path: '^libs/transport/' },
    },
    {
      name: 'transport-base-below-all',
      comment:
        "libs/transport's base/ (connections, metrics, tracing) is what every other folder of it builds on: it imports none of them.",
      severity: 'error',
      from: { path: '^libs/transport/src/base/' },
      to: { path: '^libs/transport/src/(stores|events|tools|http|service)/' },
    },
    {
      name: 'transport-service-on-top',
      comment:
        "libs/transport's service/ (the runtime a service starts with, its HTTP face, the launcher) builds on the stores, events, tools and http folders; none of them imports it.",
      severity: 'error',
      from: { path: '^libs/transport/src/(stores|events|tools|http)/' },
      to: { path: '^libs/transport/src/service/' },
    },
    {
      name: 'otel-sdk-in-services-only',
      comment:
        'libs/otel starts the OpenTelemetry SDK and only the service processes import it (the services, and `bosun serve`, which hosts three of them); every other package reaches OpenTelemetry through @opentelemetry/api alone (docs/observability.md).',
      severity: 'error',
      from: { path: '^(libs|cli|bench|mcp-servers)/', pathNot: '^(libs/otel/|cli/src/serve\\.ts$)' },
      to: { path: ['^libs/otel/', 'node_modules/@opentelemetry/(?!api/)'] },
    },
    {
      name: 'libs-layering-sandbox',
      comment:
        'libs/sandbox runs scripts for the agent loops: it sits on contract alone, below the agent loops, and knows nothing of config, models, policy or transport.',
      severity: 'error',
      from: { path: '^libs/sandbox/' },
      to: { path: '^libs/(config|models|policy|transport|agent)/' },
    },
    {
      name: 'no-circular',
      comment: 'No import cycles, inside a package or between packages.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    // Packages resolve through their node_modules symlinks to their real folders; their built
    // entries are where the rules look, and nothing past them is followed.
    preserveSymlinks: false,
    doNotFollow: { path: ['node_modules', '/dist/'] },
    exclude: { path: ['\\.test\\.ts$'] },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.eslint.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'] },
  },
};
