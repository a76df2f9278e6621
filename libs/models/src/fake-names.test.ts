import { describe, expect, it } from 'vitest';
import { FINISH_TASK_TOOL } from '@bosun/contract';

import { FakeModel } from './fake.js';
import { renderIncident } from './prompt.js';
import type { Message, ToolDeclaration } from './types.js';

// The fake model looks things up by names that come from an incident (its reason, the agents of
// payload.fake directives, ${labels.x} placeholders): names that are Object.prototype
// properties are ordinary names there, never built-ins.

const PROTO_NAMES = Object.getOwnPropertyNames(Object.prototype);
const REPORT = { type: 'object', required: ['summary'], properties: { summary: { type: 'string' } } };
const TOOLS: ToolDeclaration[] = [
  { name: 'demo__get_pods', description: 'pods', parameters: { type: 'object', properties: {} } },
  { name: FINISH_TASK_TOOL, description: 'report', parameters: REPORT },
];

const model = () =>
  new FakeModel({
    routes: { PodCrashLooping: ['kubernetes'] },
    defaultRoute: ['database'],
    plans: { kubernetes: [{ tool: 'demo__get_pods', args: { service: '${labels.constructor}', ns: '${labels.ns}' } }] },
  });

const first = (incident: Record<string, unknown>): Message[] => [{ role: 'user', text: `Investigate.\n\n${renderIncident(incident)}` }];
const base = { id: 'inc-1', source: 't', summary: 's', labels: { service: 'checkout', ns: 'shop' } };

describe('FakeModel with names that are Object.prototype properties', () => {
  it('an incident reason named like a property takes the default route', async () => {
    for (const reason of PROTO_NAMES) {
      const r = await model().generate({ agent: 'coordinator', mode: 'single', messages: first({ ...base, reason }), tools: [] });
      expect(JSON.parse(r.text ?? ''), reason).toEqual({ specialists: ['database'] });
    }
  });

  it('an agent named like a property has no plan unless the incident gives it one', async () => {
    for (const agent of PROTO_NAMES) {
      const r = await model().generate({ agent, mode: 'task', messages: first({ ...base, reason: 'x' }), tools: TOOLS });
      expect(
        r.calls.map((c) => c.name),
        agent,
      ).toEqual([FINISH_TASK_TOOL]);
    }
    // Directives keyed by such names are kept as names: constructor gets its calls, __proto__
    // does not become the prototype of the directives, and slowMs reaches nobody else.
    const payload = JSON.parse(
      '{"fake": {"calls": {"__proto__": [{"tool": "demo__get_pods"}], "constructor": [{"tool": "demo__get_pods", "args": {"who": "constructor"}}]}, "slowMs": {"toString": 60000}}}',
    ) as unknown;
    const incident = { ...base, reason: 'x', payload };
    const c = await model().generate({ agent: 'constructor', mode: 'task', messages: first(incident), tools: TOOLS });
    expect(c.calls).toEqual([{ id: 'fake-0-0', name: 'demo__get_pods', args: { who: 'constructor' } }]);
    const p = await model().generate({ agent: '__proto__', mode: 'task', messages: first(incident), tools: TOOLS });
    expect(p.calls.map((x) => x.name)).toEqual(['demo__get_pods']);
    // (A minute's slowMs for kubernetes would time this test out.)
    const k = await model().generate({ agent: 'kubernetes', mode: 'task', messages: first(incident), tools: TOOLS });
    expect(k.calls[0]?.name).toBe('demo__get_pods');
  });

  it('a ${labels.constructor} placeholder the incident does not fill is left as written', async () => {
    const r = await model().generate({
      agent: 'kubernetes',
      mode: 'task',
      messages: first({ ...base, reason: 'PodCrashLooping' }),
      tools: TOOLS,
    });
    expect(r.calls[0]?.args).toEqual({ service: '${labels.constructor}', ns: 'shop' });
  });
});
