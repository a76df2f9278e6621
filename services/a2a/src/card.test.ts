import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { Ajv } from 'ajv';
import { AgentCard } from '@a2a-js/sdk';
import { A2aConfig, type ClusterConfig } from '@bosun/config';
import { buildAgentCard, servedCard } from './card.js';

// The served card against the official A2A 0.3.0 JSON schema (a copy of its card and task
// definitions: test/fixtures/a2a/a2a-v0.3.0.schema.json says where it came from), and read back
// as a 1.0 card by the 1.x SDK's own parser.

const schema = JSON.parse(readFileSync(new URL('../../../test/fixtures/a2a/a2a-v0.3.0.schema.json', import.meta.url), 'utf8')) as {
  definitions: Record<string, unknown>;
};
const ajv = new Ajv({ allErrors: true, strict: false });
ajv.addSchema({ ...schema, $id: 'a2a-0.3' });
const validCard = ajv.getSchema('a2a-0.3#/definitions/AgentCard')!;

const config = (a2a: Record<string, unknown> = {}) =>
  ({
    a2a: A2aConfig.parse({ port: 1, tokens: [], ...a2a }),
    specialists: { kubernetes: { description: 'pods and deployments' } },
  }) as unknown as ClusterConfig;

describe('the served agent card', () => {
  const card = servedCard(buildAgentCard(config(), 'http://a2a.example:8091'));

  it('is a valid A2A 0.3 card: url, protocolVersion, preferredTransport, additionalInterfaces, the security scheme in its 0.3 form', () => {
    expect(validCard(card), JSON.stringify(validCard.errors)).toBe(true);
    expect(card).toMatchObject({
      url: 'http://a2a.example:8091/a2a/jsonrpc',
      protocolVersion: '0.3.0',
      preferredTransport: 'JSONRPC',
      additionalInterfaces: [
        { url: 'http://a2a.example:8091/a2a/jsonrpc', transport: 'JSONRPC' },
        { url: 'http://a2a.example:8091/a2a/rest', transport: 'HTTP+JSON' },
      ],
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      security: [{ bearer: [] }],
      supportsAuthenticatedExtendedCard: false,
    });
  });

  it('is the 1.0 card too: the SDK reads its interfaces (1.0 first, 0.3 after) and its HTTP auth scheme', () => {
    const v1 = AgentCard.fromJSON(card);
    expect(v1.supportedInterfaces.map((i) => `${i.protocolBinding} ${i.protocolVersion}`)).toEqual([
      'JSONRPC 1.0',
      'HTTP+JSON 1.0',
      'JSONRPC 0.3',
      'HTTP+JSON 0.3',
    ]);
    expect(v1.securitySchemes.bearer?.scheme?.$case).toBe('httpAuthSecurityScheme');
    expect(v1.securityRequirements).toEqual([{ schemes: { bearer: { list: [] } } }]);
    expect(v1.capabilities?.extendedAgentCard).toBe(false);
  });

  it('with anonymous access it names no security requirement, and stays valid', () => {
    const open = servedCard(buildAgentCard(config({ allowAnonymous: true }), 'http://h:1'));
    expect(validCard(open), JSON.stringify(validCard.errors)).toBe(true);
    expect(open.security).toEqual([]);
  });

  it('the schema copy does reject a card without the 0.3 fields (the card as it was before)', () => {
    const v1Only = AgentCard.toJSON(buildAgentCard(config(), 'http://h:1')) as Record<string, unknown>;
    expect(validCard(v1Only)).toBe(false);
    expect(JSON.stringify(validCard.errors)).toContain('url');
  });
});
