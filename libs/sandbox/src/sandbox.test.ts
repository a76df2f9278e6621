import { describe, expect, it } from 'vitest';
import { runScript, defaultSandboxPool, type SandboxHost, type ScriptOutcome, type ToolAnswer } from './index.js';

interface Call {
  name: string;
  args: Record<string, unknown>;
  index: number;
}

function host(answer: (c: Call) => ToolAnswer | Promise<ToolAnswer> = (c) => ({ ok: { tool: c.name, args: c.args } })) {
  const calls: Call[] = [];
  const h: SandboxHost = {
    tools: ['demo__read', 'demo__write'],
    callTool: async (name, args, index) => {
      calls.push({ name, args, index });
      return answer({ name, args, index });
    },
    recorded: { clock: [1_700_000_000_000, 1_700_000_000_000], random: [0.25] },
  };
  return { h, calls };
}

function scriptError(o: ScriptOutcome): Extract<ScriptOutcome, { kind: 'script_error' }> {
  if (o.kind !== 'script_error') throw new Error(`expected a script error, got ${JSON.stringify(o)}`);
  return o;
}

/** The value a script returned as `{ observation }` (throws on any other outcome). */
function observation(o: ScriptOutcome): unknown {
  if (o.kind !== 'result' || o.result.tag !== 'observation')
    throw new Error(`expected an observation, got ${JSON.stringify(o).slice(0, 300)}`);
  return o.result.value;
}

describe('runScript', () => {
  it('chains tools in one script and returns the tagged result', async () => {
    const { h, calls } = host((c) => ({ ok: { n: (c.args.n as number) + 1 } }));
    const out = await runScript(
      'const a = call_tool("demo__read", { n: 1 }); const b = call_tool("demo__write", { n: a.n }); console.log("b is", b); return { final_result: { n: b.n } };',
      h,
    );
    expect(out).toEqual({ kind: 'result', result: { tag: 'final_result', value: { n: 3 } }, console: 'b is {"n":3}\n', toolCalls: 2 });
    expect(calls.map((c) => [c.name, c.index])).toEqual([
      ['demo__read', 0],
      ['demo__write', 1],
    ]);
  });

  it('gives the recorded clock and Math.random values first, then new ones, reported before the next call', async () => {
    const { h, calls } = host();
    const reported: { clock: number[]; random: number[] }[] = [];
    let reportedBeforeCall = 0;
    h.record = (v) => reported.push(v);
    const inner = h.callTool.bind(h);
    h.callTool = (name, args, index) => {
      reportedBeforeCall = reported.length;
      return inner(name, args, index);
    };
    const before = Date.now();
    const out = await runScript(
      'const v = [Date.now(), new Date().getTime(), Math.random(), new Date(0).getTime(), Date.now(), Math.random()]; call_tool("demo__read", {}); return { observation: v };',
      h,
    );
    const value = observation(out) as number[];
    expect(value.slice(0, 4)).toEqual([1_700_000_000_000, 1_700_000_000_000, 0.25, 0]);
    expect(value[4]).toBeGreaterThanOrEqual(before);
    expect(value[5]).toBeGreaterThanOrEqual(0);
    expect(value[5]).toBeLessThan(1);
    // new Date(0) reads the clock too (and ignores it): the third value is new, as is the fourth.
    expect(reported).toHaveLength(1);
    expect(reported[0]?.clock).toHaveLength(2);
    expect(reported[0]?.clock[1]).toBe(value[4]);
    expect(reported[0]?.random).toEqual([value[5]]);
    expect(reportedBeforeCall).toBe(1);
    expect(calls).toHaveLength(1);
  });

  it('gives a tool error to the script as a catchable ToolError', async () => {
    const { h } = host(() => ({ error: 'denied by an operator' }));
    const out = await runScript(
      'try { call_tool("demo__write", {}); } catch (e) { return { observation: e.name + ": " + e.message }; }',
      h,
    );
    expect(out.kind === 'result' && out.result).toEqual({ tag: 'observation', value: 'ToolError: denied by an operator' });
  });

  it.each([
    ['a bare function', 'demo__read({ n: 1 })', /tools are not functions/],
    ['positional arguments', 'call_tool("demo__read", 1, 2)', /not positional arguments/],
    ['a non-string name', 'call_tool(call_tool, {})', /must be a string, not function/],
    ['a non-object', 'call_tool("demo__read", 5)', /one object of named arguments, not number/],
    ['an array', 'call_tool("demo__read", [1])', /one object of named arguments, not an array/],
    ['an unknown tool', 'call_tool("demo__nope", {})', /unknown tool "demo__nope"/],
  ])('corrects %s', async (_what, script, message) => {
    const { h, calls } = host();
    const out = scriptError(await runScript(script, h));
    expect(out.message).toMatch(message);
    expect(calls).toHaveLength(0);
  });

  it('corrects a result that is not tagged, and a Promise', async () => {
    const { h } = host();
    expect(scriptError(await runScript('return 42;', h)).message).toMatch(/not a tagged result/);
    expect(scriptError(await runScript('return { observation: 1, final_result: 2 };', h)).message).toMatch(/exactly one tag/);
    expect(scriptError(await runScript('return (async () => 1)();', h)).message).toMatch(/returned a Promise/);
    expect(scriptError(await runScript('return { transfer_to_agent: {} };', h)).message).toMatch(/name of the agent/);
  });

  it('reports syntax errors and uncaught exceptions verbatim', async () => {
    const { h } = host();
    expect(scriptError(await runScript('return {', h)).message).toMatch(/^SyntaxError/);
    expect(scriptError(await runScript('throw new Error("boom")', h)).message).toBe('Error: boom');
  });

  it('stops the script and rethrows when the host fails', async () => {
    const { h } = host(() => {
      throw new Error('gateway down');
    });
    await expect(runScript('try { call_tool("demo__read", {}); } catch (e) { } for (;;) {}', h)).rejects.toThrow('gateway down');
  });

  describe('escape and abuse: each a script error, the host alive', () => {
    const cases: [string, string, RegExp, string?, number?][] = [
      ['an infinite loop', 'for (;;) {}', /time limit/, 'time'],
      ['an infinite loop that catches', 'for (;;) { try { for (;;) {} } catch (e) {} }', /time limit/, 'time'],
      ['allocating 1 GB', 'const b = new ArrayBuffer(1e9); return { observation: b.byteLength };', /out of memory/, 'memory'],
      ['allocating arrays without end', 'const a = []; for (;;) a.push(new Array(1e5).fill(a.length));', /out of memory|time limit/],
      ['recursion 1e6 deep', 'function f(n) { return n >= 1e6 ? n : f(n + 1) + 1; } return { observation: f(0) };', /stack/, 'stack'],
      // Building 50 MB in a fresh interpreter takes seconds on a loaded machine: more time, so that the console limit is what stops it.
      ['a 50 MB console.log', 'console.log("x".repeat(50 * 1024 * 1024));', /console|out of memory/, undefined, 20_000],
      ['require', 'return { observation: require("fs") };', /'require' is not defined/],
      ['process', 'process.exit(1);', /'process' is not defined/],
      ['import()', 'return import("fs");', /Promise/],
      ['a static import', 'import fs from "fs";', /SyntaxError/],
      ['constructor.constructor', 'globalThis.constructor.constructor("return process")().exit(1);', /'process' is not defined/],
      ['Function("return this")', 'Function("return this")().process.mainModule.require("fs");', /TypeError/],
      ['10,000 call_tools', 'for (let i = 0; i < 10000; i++) call_tool("demo__read", { i });', /tool-call limit/, 'tool_calls'],
      [
        '10,000 call_tools that catch',
        'for (let i = 0; i < 10000; i++) { try { call_tool("demo__read", { i }); } catch (e) {} }',
        /tool-call limit/,
        'tool_calls',
      ],
    ];
    it.each(cases)('%s', async (_what, script, message, limit, timeMs = 1_000) => {
      const { h, calls } = host();
      const out = scriptError(await runScript(script, h, { timeMs }));
      expect(out.message).toMatch(message);
      if (limit) expect(out.limit).toBe(limit);
      expect(calls.length).toBeLessThanOrEqual(50);
      expect(typeof process.pid).toBe('number');
      // The next script runs normally.
      const after = await runScript('return { observation: 1 + 1 };', h);
      expect(observation(after)).toBe(2);
    });

    it('prototype pollution stays in the sandbox, and polluting argument names are refused', async () => {
      const { h, calls } = host();
      const out = await runScript(
        [
          'const r = call_tool("demo__read", { n: 1 });',
          'r.__proto__.polluted = "yes"; Object.prototype.hacked = "yes"; Array.prototype.push = null;',
          'let refused = "";',
          'try { call_tool("demo__write", JSON.parse(\'{"__proto__": {"polluted": "yes"}}\')); } catch (e) { refused = e.message; }',
          'try { call_tool("demo__write", { constructor: { prototype: { polluted: "yes" } } }); } catch (e) { refused += " | " + e.message; }',
          'return { observation: refused };',
        ].join('\n'),
        h,
      );
      expect(observation(out)).toMatch(/may not be named "__proto__" \| .*may not be named "(constructor|prototype)"/);
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      expect(({} as Record<string, unknown>).hacked).toBeUndefined();
      expect(typeof [].push).toBe('function');
      expect(calls).toHaveLength(1);
      expect(Object.getPrototypeOf(calls[0]?.args)).toBe(Object.prototype);
    });
  });

  it('limits the size of the result', async () => {
    const { h } = host();
    const out = scriptError(await runScript('return { observation: "x".repeat(2000) };', h, { maxOutputChars: 1000 }));
    expect(out.limit).toBe('output');
  });

  it('does not count time waiting for tools as script time', async () => {
    const { h } = host(async () => {
      await new Promise((r) => setTimeout(r, 400));
      return { ok: 1 };
    });
    const out = await runScript('call_tool("demo__read", {}); return { observation: call_tool("demo__read", {}) };', h, { timeMs: 300 });
    expect(out.kind).toBe('result');
  });

  it('runs scripts side by side, each suspended on its own tool call', async () => {
    const { h } = host(async (c) => {
      await new Promise((r) => setTimeout(r, 50));
      return { ok: c.args.n };
    });
    const outs = await Promise.all(
      [1, 2, 3, 4].map((n) =>
        runScript(`return { observation: call_tool("demo__read", { n: ${n} }) + call_tool("demo__read", { n: 10 }) };`, h),
      ),
    );
    expect(outs.map((o) => observation(o))).toEqual([11, 12, 13, 14]);
  });

  it('reuses its threads and interpreter modules from one script to the next', async () => {
    const { h } = host();
    await runScript('return { observation: call_tool("demo__read", {}) };', h);
    const before = defaultSandboxPool().stats();
    for (let i = 0; i < 5; i++) await runScript('console.log(Date.now()); return { observation: call_tool("demo__read", { i: 1 }) };', h);
    const after = defaultSandboxPool().stats();
    expect(after.modules.created).toBe(before.modules.created);
    expect(after.threadsStarted).toBe(before.threadsStarted);
    expect(after.modules.idle).toBeGreaterThanOrEqual(1);
  });
});
