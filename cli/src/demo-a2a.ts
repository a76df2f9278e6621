import { createHash } from 'node:crypto';
import { loadClusterConfig } from '@bosun/config';

/** The token of the demo config's A2A server (its hash is in infra/demo/bosun.yaml). A public demo value, not a secret. */
export const DEMO_A2A_TOKEN = 'bosun-demo-a2a-token';

/** What the demo prints about its A2A server: the card's URL, and the demo token when the config still holds its hash. */
export function a2aDemoLines(configFile: string): string[] {
  const a2a = loadClusterConfig(configFile, { resolveServers: false, resolveOperatorToken: false }).a2a;
  if (!a2a) return [];
  const base = a2a.publicUrl ?? `http://${a2a.host}:${a2a.port}`;
  const demoHash = createHash('sha256').update(DEMO_A2A_TOKEN).digest('hex');
  const demo = a2a.tokens.some((t) => t.sha256 === demoHash);
  return [
    `A2A server: agent card at ${base}/.well-known/agent-card.json (docs/a2a.md)`,
    ...(demo ? [`  demo token (tenant "demo", operator): Authorization: Bearer ${DEMO_A2A_TOKEN}`] : []),
  ];
}
