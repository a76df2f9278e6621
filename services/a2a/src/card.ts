/**
 * The agent card: Bosun's incident responder, with a triage skill and one skill per specialist,
 * its two transports (JSON-RPC and HTTP+JSON, both from the SDK, each in protocol 1.0 and 0.3)
 * and its bearer security scheme.
 *
 * One card is served to every client, whatever protocol version it speaks: the 1.0 fields
 * (`supportedInterfaces`, `securityRequirements`, the `oneof` form of each security scheme) and,
 * beside them, the 0.3 fields (`url`, `protocolVersion`, `preferredTransport`,
 * `additionalInterfaces`, `security`, the `type` form of each scheme). A 0.3 client reads the
 * second set and ignores the first, a 1.0 client does the opposite (the 1.x SDK treats a card
 * with a non-empty `supportedInterfaces` as a 1.0 card). The card is checked against the official
 * 0.3 JSON schema in `services/a2a/src/card.test.ts`.
 */
import { A2A_PROTOCOL_VERSION, AgentCard, type AgentSkill } from '@a2a-js/sdk';
import type { ClusterConfig } from '@bosun/config';

/** The legacy protocol version both transports also speak (the SDK's compat layer). */
export const A2A_LEGACY_PROTOCOL_VERSION = '0.3';
/** What a 0.3 card says in `protocolVersion` (0.3 clients compare it as a semantic version). */
const LEGACY_CARD_VERSION = '0.3.0';

/** Where the transports are mounted, under the server's base URL. */
export const JSONRPC_PATH = '/a2a/jsonrpc';
export const REST_PATH = '/a2a/rest';
/** The name of the card's security scheme. */
export const BEARER_SCHEME = 'bearer';

const INPUT_MODES = ['application/json', 'text/plain'];
const BEARER_DESCRIPTION = 'A bearer token issued by the operators; it names the tenant.';

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

/** The card of a server reachable at `baseUrl` (no trailing slash), in the SDK's 1.0 shape. */
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
  const iface = (path: string, protocolBinding: string, protocolVersion: string) => ({
    url: `${baseUrl}${path}`,
    protocolBinding,
    tenant: '',
    protocolVersion,
  });
  return {
    name: a2a.name,
    description:
      'Unattended incident response: a coordinator routes each incident to specialist agents that investigate through policy-checked tools; every answer says plainly what is incomplete.',
    // 1.0 first (the preferred interfaces); 0.3 (`message/send`, `/v1/message:send`, …) on both
    // transports through the SDK's compat layer. The SDK checks a request's A2A-Version against this list.
    supportedInterfaces: [
      iface(JSONRPC_PATH, 'JSONRPC', A2A_PROTOCOL_VERSION),
      iface(REST_PATH, 'HTTP+JSON', A2A_PROTOCOL_VERSION),
      iface(JSONRPC_PATH, 'JSONRPC', A2A_LEGACY_PROTOCOL_VERSION),
      iface(REST_PATH, 'HTTP+JSON', A2A_LEGACY_PROTOCOL_VERSION),
    ],
    provider: { url: 'https://github.com/bosun', organization: 'Bosun' },
    version: '0.1.0',
    capabilities: { streaming: true, pushNotifications: a2a.pushNotifications !== undefined, extensions: [], extendedAgentCard: false },
    securitySchemes: {
      [BEARER_SCHEME]: {
        scheme: {
          $case: 'httpAuthSecurityScheme',
          value: { description: BEARER_DESCRIPTION, scheme: 'bearer', bearerFormat: 'opaque' },
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

type Json = Record<string, unknown>;

/**
 * The card as served: the protocol 1.0 JSON form of `card` with the 0.3 fields beside it. The 0.3
 * part is derived from the 1.0 card, never written twice: its `url` is the first 0.3 JSON-RPC
 * interface, `additionalInterfaces` every 0.3 interface, each security scheme carries both its
 * 1.0 `oneof` field and its 0.3 `type` form, and `security` mirrors `securityRequirements`.
 */
export function servedCard(card: AgentCard): Json {
  const v1 = AgentCard.toJSON(card) as Json;
  const legacy = card.supportedInterfaces.filter((i) => i.protocolVersion === A2A_LEGACY_PROTOCOL_VERSION);
  const primary = legacy.find((i) => i.protocolBinding === 'JSONRPC') ?? legacy[0];
  if (!primary) throw new Error('the agent card has no 0.3 interface to name in its url');
  const schemes: Json = {};
  for (const [name, s] of Object.entries(card.securitySchemes)) {
    const v1Scheme = (v1.securitySchemes as Json)[name] as Json;
    // Only the kinds Bosun serves are translated; another kind would be a change to this function.
    if (s.scheme?.$case !== 'httpAuthSecurityScheme') throw new Error(`security scheme ${name}: only HTTP auth is translated to 0.3`);
    const h = s.scheme.value;
    schemes[name] = {
      ...v1Scheme,
      type: 'http',
      scheme: h.scheme,
      ...(h.bearerFormat ? { bearerFormat: h.bearerFormat } : {}),
      ...(h.description ? { description: h.description } : {}),
    };
  }
  const skills = ((v1.skills as Json[] | undefined) ?? []).map((s) => ({ ...s, security: [] }));
  return {
    ...v1,
    skills,
    securitySchemes: schemes,
    // 0.3: the preferred endpoint and the others, by transport.
    url: primary.url,
    preferredTransport: primary.protocolBinding,
    protocolVersion: LEGACY_CARD_VERSION,
    additionalInterfaces: legacy.map((i) => ({ url: i.url, transport: i.protocolBinding })),
    supportsAuthenticatedExtendedCard: card.capabilities?.extendedAgentCard ?? false,
    security: card.securityRequirements.map((r) => Object.fromEntries(Object.entries(r.schemes).map(([name, list]) => [name, list.list]))),
  };
}
