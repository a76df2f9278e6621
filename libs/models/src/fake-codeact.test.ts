import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { validateAgainstSchema } from '@bosun/config';

import { FakeModel } from './fake.js';
import { renderIncident } from './prompt.js';
import type { Message, ModelRequest } from './types.js';

// The fake model in CodeAct mode: the script of each turn from payload.fake.scripts, else the
// plan chained in one script whose final_result is filled, inside the script, from the output
// schema and what the tools returned.

const REPORT = {
  type: 'object',
  required: ['summary', 'evidence'],
  properties: { summary: { type: 'string' }, evidence: { type: 'array', items: { type: 'string' } } },
};

function request(payload: unknown, messages: Message[] = []): ModelRequest {
  const incident = { id: 'inc-1', source: 't', reason: 'X', summary: 's', labels: { service: 'checkout' }, payload };
  return {
    agent: 'triage',
    mode: 'codeact',
    messages: [{ role: 'user', text: `Look.\n\n${renderIncident(incident)}` }, ...messages],
    tools: [],
    outputSchema: REPORT,
  };
}

const script = (text: string | undefined) => /```js\n([\s\S]*?)\n```/.exec(text ?? '')?.[1];

describe('FakeModel: CodeAct mode', () => {
  const plan = [
    { tool: 'demo__get_pods', args: { service: '${labels.service}' } },
    { tool: 'demo__get_logs', args: { service: '${labels.service}', lines: 5 } },
  ];
  const fake = new FakeModel({ plans: { triage: plan } });

  it('writes the script of each turn from payload.fake.scripts, then none', async () => {
    const payload = { fake: { scripts: { triage: ['return { observation: 1 };', 'return { final_result: {} };'] } } };
    expect(script((await fake.generate(request(payload))).text)).toBe('return { observation: 1 };');
    const second = await fake.generate(
      request(payload, [
        { role: 'model', text: 'x' },
        { role: 'user', text: 'Observation: 1' },
      ]),
    );
    expect(script(second.text)).toBe('return { final_result: {} };');
    const third = await fake.generate(
      request(payload, [
        { role: 'model', text: 'x' },
        { role: 'user', text: 'a' },
        { role: 'model', text: 'y' },
        { role: 'user', text: 'b' },
      ]),
    );
    expect(script(third.text)).toBeUndefined();
    expect((await fake.generate(request({ fake: { scripts: { triage: 'return 1;' } } }))).text).toContain('return 1;');
  });

  it('chains its plan in one script that builds its final_result from what the tools returned', async () => {
    const first = await fake.generate(request(undefined));
    expect(first.calls).toEqual([]);
    const s = script(first.text)!;
    expect(s).toContain('output: call_tool("demo__get_pods", {"service":"checkout"})');
    expect(s).toContain('output: call_tool("demo__get_logs", {"service":"checkout","lines":5})');
    // Run as the sandbox runs it (the body of a function; call_tool answers with the tool's result).
    const answers: Record<string, unknown> = {
      demo__get_pods: { pods: [{ name: 'checkout-7c9d', status: 'CrashLoopBackOff' }] },
      demo__get_logs: 'OOMKilled: memory limit 256Mi',
    };
    const run = runInNewContext(`(function (call_tool, console) {\n${s}\n})`) as (
      call: (tool: string) => unknown,
      c: { log(): void },
    ) => { final_result: unknown };
    const { final_result } = run((tool) => answers[tool], { log: () => undefined });
    expect(validateAgainstSchema(REPORT, final_result)).toBeNull();
    // Before: the final_result was written before the script ran, with empty evidence.
    expect(final_result).toEqual({
      summary: 'Checked 2 tool results for incident inc-1 (demo__get_pods, demo__get_logs).',
      evidence: ['{"pods":[{"name":"checkout-7c9d","status":"CrashLoopBackOff"}]}', 'OOMKilled: memory limit 256Mi'],
    });
    // A later turn (after a script error) reports without calling tools again.
    const later = await fake.generate(
      request(undefined, [
        { role: 'model', text: 'x' },
        { role: 'user', text: 'Your script failed' },
      ]),
    );
    expect(script(later.text)).toMatch(/^return \{ final_result: /);
  });

  it('an agent told to stall answers without a script', async () => {
    const r = await fake.generate(request({ fake: { stall: ['triage'] } }));
    expect(script(r.text)).toBeUndefined();
  });
});
