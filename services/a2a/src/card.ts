/**
 * The agent card: Bosun's incident responder, with a triage skill and one skill per specialist,
 * its two transports (JSON-RPC and HTTP+JSON, both from the SDK) and its bearer security scheme.
 */
import { A2A_PROTOCOL_VERSION, type AgentCard, type AgentSkill } from '@a2a-js/sdk';

/** The legacy protocol version the JSON-RPC transport also speaks. */
const A2A_LEGACY_PROTOCOL_VERSION = '0.3';
import type { ClusterConfig } from '@bosun/config';

/** Where the transports are mounted, under the server's base URL. */
export const JSONRPC_PATH = '/a2a/jsonrpc';
export const REST_PATH = '/a2a/rest';
/** The name of the card's security scheme. */
export const BEARER_SCHEME = 'bearer';

const INPUT_MODES = ['application/json', 'text/plain'];

function skill(id: string, name: string, description: string, more: { tags: string[]; examples?: string[] }): AgentSkill {
  return {
    id,
    name,
    description,
    tags: more.tags,
    examples: more.examples ?? [],
    inputModes: INPUT_MODES,
    outputModes: INPUT_MODES,
    securityRequirements: [],
  };
}

/** The card of a server reachable at `baseUrl` (no trailing slash). */
export function buildAgentCard(config: ClusterConfig, baseUrl: string): AgentCard {
  const a2a = config.a2a!;
  const skills = [
    skill(
      'triage',
      'Incident triage',
      'Takes an incident (a DataPart with the incident envelope, or text that becomes its summary), routes it to the specialists and answers with their merged findings. Parts that could not be checked are named INCOMPLETE.',
      { tags: ['incident', 'triage', 'sre'], examples: ['PodCrashLooping on checkout: pods restart every 2 minutes'] },
    ),
    ...Object.entries(config.specialists).map(([name, spec]) =>
      skill(`specialist-${name}`, `Specialist: ${name}`, spec.description, { tags: ['specialist', name] }),
    ),
  ];
  const iface = (path: string, protocolBinding: string) => ({
    url: `${baseUrl}${path}`,
    protocolBinding,
    tenant: '',
    protocolVersion: A2A_PROTOCOL_VERSION,
  });
  return {
    name: a2a.name,
    description:
      'Unattended incident response: a coordinator routes each incident to specialist agents that investigate through policy-checked tools; every answer says plainly what is incomplete.',
    // Protocol 1.0 on both transports; 0.3 (`message/send`, `tasks/get`, …) on JSON-RPC through the SDK's compat layer.
    supportedInterfaces: [
      iface(JSONRPC_PATH, 'JSONRPC'),
      iface(REST_PATH, 'HTTP+JSON'),
      { ...iface(JSONRPC_PATH, 'JSONRPC'), protocolVersion: A2A_LEGACY_PROTOCOL_VERSION },
    ],
    provider: { url: 'https://github.com/bosun', organization: 'Bosun' },
    version: '0.1.0',
    capabilities: { streaming: true, pushNotifications: a2a.pushNotifications !== undefined, extensions: [], extendedAgentCard: false },
    securitySchemes: {
      [BEARER_SCHEME]: {
        scheme: {
          $case: 'httpAuthSecurityScheme',
          value: { description: 'A bearer token issued by the operators; it names the tenant.', scheme: 'bearer', bearerFormat: 'opaque' },
        },
      },
    },
    securityRequirements: a2a.allowAnonymous ? [] : [{ schemes: { [BEARER_SCHEME]: { list: [] } } }],
    defaultInputModes: INPUT_MODES,
    defaultOutputModes: INPUT_MODES,
    skills,
    signatures: [],
  };
}
