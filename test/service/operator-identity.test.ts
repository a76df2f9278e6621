import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovalStore, type Approval } from '@bosun/transport';
import type { ApprovalView } from '@bosun/contract';
import {
  demoConfig,
  freePort,
  openContext,
  runCli,
  startService,
  writeConfig,
  type ServiceProcess,
  type TestContext,
} from '../helpers/index.js';

// Approvals by named people (issue 23, item 1) on one coordinator process, no cluster: per-person
// tokens from the config's `operators` on the operator HTTP API and the CLI. A decision records
// the verified person; a `by` typed beside a person's token is only a note; a token without the
// `approve` role is refused (HTTP 403, CLI exit 4) and decides nothing; the shared operator token
// still works, recorded unverified.

const SHARED = 'shared-operator-token-1';
const TOKENS = { alice: 'alice-token-0123456789', bob: 'bob-token-0123456789', rita: 'rita-token-0123456789' };
const sha = (t: string) => createHash('sha256').update(t).digest('hex');

let ctx: TestContext;
let store: ApprovalStore;
let coordinator: ServiceProcess | undefined;
let configFile: string;
let base: string;

/** A pending approval of one call that needs approval. */
function seed(id: string): Promise<Approval> {
  const now = Date.now();
  return store.request({
    id,
    runId: 'ridentity000000000001',
    incidentId: `inc-${id}`,
    agent: 'kubernetes',
    taskId: `task-${id}`,
    calls: [{ index: 0, tool: 'demo__restart_pod', args: { name: 'p' }, needsApproval: true, key: `${id}-c0` }],
    reason: 'restart it',
    createdAt: new Date(now).toISOString(),
    timeoutAt: new Date(now + 300_000).toISOString(),
  });
}

const call = (path: string, token: string, body?: unknown) =>
  fetch(`${base}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

const bosun = (args: string[], env: Record<string, string> = {}) => runCli({ ...ctx.env, BOSUN_CONFIG: configFile, ...env }, args);

beforeAll(async () => {
  ctx = await openContext('identity');
  store = new ApprovalStore({ redis: ctx.redis, prefix: ctx.prefix });
  const port = await freePort();
  const cfg = demoConfig();
  cfg.coordinator.http = { port, operatorToken: '${BOSUN_OPERATOR_TOKEN}' };
  cfg.operators = [
    { name: 'alice', tokenSha256: sha(TOKENS.alice), roles: ['approve', 'cancel', 'read'] },
    { name: 'bob', tokenSha256: sha(TOKENS.bob), roles: ['approve', 'read'] },
    { name: 'rita', tokenSha256: sha(TOKENS.rita), roles: ['read'] },
  ];
  configFile = writeConfig(ctx, cfg, 'bosun-identity.json');
  coordinator = startService('coordinator', { ...ctx.env, BOSUN_CONFIG: configFile, BOSUN_OPERATOR_TOKEN: SHARED });
  await coordinator.ready();
  await coordinator.waitForLine(/operator API listening/);
  base = `http://127.0.0.1:${port}`;
});

afterAll(async () => {
  await coordinator?.stop();
  await store?.close();
  await ctx?.close();
});

describe('the operator HTTP API with per-person tokens', () => {
  it('records the verified person and the path; a typed by is only a note', async () => {
    await seed('ap-id-http-1');
    const r = await call('/approvals/ap-id-http-1', TOKENS.alice, { decision: 'approve', by: 'mallory' });
    expect(r.status, await r.clone().text()).toBe(200);
    const a = (await store.get('ap-id-http-1'))!;
    expect(a).toMatchObject({ status: 'approved', decidedBy: 'alice' });
    expect(a.actor).toMatchObject({ name: 'alice', verified: true, path: 'http', note: 'mallory' });
    expect(a.actor?.address).toMatch(/127\.0\.0\.1/);
  });

  it('refuses a token without the approve role with 403, deciding nothing; it may still read', async () => {
    await seed('ap-id-http-2');
    const r = await call('/approvals/ap-id-http-2', TOKENS.rita, { decision: 'approve' });
    expect(r.status).toBe(403);
    expect(await r.json()).toMatchObject({
      code: 'forbidden',
      error: expect.stringMatching(/rita may not do this: .* needs the "approve" role/),
    });
    expect((await store.get('ap-id-http-2'))!.status).toBe('pending');
    expect((await call('/approvals', TOKENS.rita)).status).toBe(200);
    expect((await call('/runs/rnone0000000000000000/cancel', TOKENS.bob, {})).status).toBe(403);
    expect((await call('/approvals', 'not-a-token')).status).toBe(401);
  });

  it('keeps the shared token working, recorded unverified under the by given', async () => {
    const r = await call('/approvals/ap-id-http-2', SHARED, { decision: 'deny', reason: 'no', by: 'carol' });
    expect(r.status).toBe(200);
    expect((await store.get('ap-id-http-2'))!).toMatchObject({
      status: 'denied',
      decidedBy: 'carol',
      actor: { name: 'carol', verified: false, path: 'http' },
    });
  });
});

describe('the CLI with per-person tokens', () => {
  it('records the person of BOSUN_TOKEN, verified, on path cli', async () => {
    await seed('ap-id-cli-1');
    const r = await bosun(['approve', 'ap-id-cli-1', '--by', 'someone-else'], { BOSUN_TOKEN: TOKENS.bob });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('approved (calls 0) by bob');
    expect((await store.get('ap-id-cli-1'))!.actor).toEqual({ name: 'bob', verified: true, path: 'cli', note: 'someone-else' });
  });

  it('refuses with exit 4: no token when the config names operators, an unknown token, a token without the role', async () => {
    await seed('ap-id-cli-2');
    const none = await bosun(['approve', 'ap-id-cli-2']);
    expect(none.code).toBe(4);
    expect(none.stderr).toMatch(/names its operators .*set BOSUN_TOKEN/);
    const unknown = await bosun(['approve', 'ap-id-cli-2'], { BOSUN_TOKEN: 'who-knows' });
    expect(unknown.code).toBe(4);
    expect(unknown.stderr).toContain('not the token of any operator');
    const rita = await bosun(['deny', 'ap-id-cli-2', '--reason', 'x'], { BOSUN_TOKEN: TOKENS.rita });
    expect(rita.code).toBe(4);
    expect(rita.stderr).toMatch(/rita may not do this: deciding approval ap-id-cli-2 needs the "approve" role \(rita has: read\)/);
    expect(rita.stderr).not.toContain(TOKENS.rita);
    expect((await store.get('ap-id-cli-2'))!.status).toBe('pending');
    // Reading needs no token: the CLI reads Redis as it always has.
    expect((await bosun(['approvals', 'show', 'ap-id-cli-2'])).code).toBe(0);
  });
});

describe('who has looked at an approval', () => {
  it('records each identified person who reads one approval (HTTP, CLI), once each, and nobody for a list or the shared token', async () => {
    await seed('ap-id-seen-1');
    const first = await call('/approvals/ap-id-seen-1', TOKENS.rita);
    expect(first.status).toBe(200);
    const seen = ((await first.json()) as ApprovalView).viewers!;
    expect(seen).toEqual([{ name: 'rita', verified: true, path: 'http', at: expect.any(String) }]);
    // A list and the shared token record nobody.
    expect((await call('/approvals', TOKENS.bob)).status).toBe(200);
    expect((await call('/approvals/ap-id-seen-1', SHARED)).status).toBe(200);
    // Reading without a token (the CLI needs none to read) records nobody either.
    const anonymous = await bosun(['approvals', 'show', 'ap-id-seen-1']);
    expect(anonymous.code, anonymous.stderr).toBe(0);
    expect((JSON.parse(anonymous.stdout) as ApprovalView).viewers).toHaveLength(1);

    const shown = await bosun(['approvals', 'show', 'ap-id-seen-1'], { BOSUN_TOKEN: TOKENS.bob });
    expect(shown.code, shown.stderr).toBe(0);
    const viewers = (JSON.parse(shown.stdout) as ApprovalView).viewers!;
    expect(viewers.map((v) => [v.name, v.path])).toEqual([
      ['bob', 'cli'],
      ['rita', 'http'],
    ]);
    // rita again: still one entry for her, at the later time.
    const again = (await (await call('/approvals/ap-id-seen-1', TOKENS.rita)).json()) as ApprovalView;
    expect(again.viewers!.map((v) => v.name)).toEqual(['rita', 'bob']);
    expect(Date.parse(again.viewers![0]!.at)).toBeGreaterThan(Date.parse(seen[0]!.at));
    // `bosun approvals` prints them.
    const listed = await bosun(['approvals']);
    expect(listed.stdout).toMatch(/seen by: rita \(http\) \S+, bob \(cli\) \S+/);
    // A token that is nobody's is refused when reading, as when deciding.
    expect((await bosun(['approvals', 'show', 'ap-id-seen-1'], { BOSUN_TOKEN: 'who-knows' })).code).toBe(4);
  });
});
