import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, describe, expect, it } from 'vitest';
import { SandboxAborted, SandboxPool, type SandboxHost, type ScriptOutcome, type ToolAnswer } from './index.js';

// The sandbox's threads as a hostile script author meets them (issue 19, items 2-4, and the
// event loop of the process around them): limits that hold from outside the interpreter, memory
// given back, a process that stays responsive, and a script whose thread is stopped under it run
// again without any tool call made twice.

const pools: SandboxPool[] = [];
/** A pool of its own, its threads started (so that no timing below counts a thread's start). */
async function pool(threads = 1): Promise<SandboxPool> {
  const p = new SandboxPool({ threads });
  pools.push(p);
  await p.warm();
  return p;
}
afterAll(async () => {
  await Promise.all(pools.map((p) => p.close()));
});

interface Call {
  name: string;
  args: Record<string, unknown>;
  index: number;
}

function host(answer: (c: Call) => ToolAnswer | Promise<ToolAnswer> = (c) => ({ ok: c.args })) {
  const calls: Call[] = [];
  const h: SandboxHost = {
    tools: ['demo__read', 'demo__write'],
    callTool: async (name, args, index) => {
      calls.push({ name, args, index });
      return answer({ name, args, index });
    },
  };
  return { h, calls };
}

function scriptError(o: ScriptOutcome): Extract<ScriptOutcome, { kind: 'script_error' }> {
  if (o.kind !== 'script_error') throw new Error(`expected a script error, got ${JSON.stringify(o).slice(0, 300)}`);
  return o;
}

/** The value a script returned as `{ observation }` (throws on any other outcome). */
function observation(o: ScriptOutcome): unknown {
  if (o.kind !== 'result' || o.result.tag !== 'observation')
    throw new Error(`expected an observation, got ${JSON.stringify(o).slice(0, 300)}`);
  return o.result.value;
}

async function timed<T>(f: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const t0 = performance.now();
  const value = await f();
  return { value, ms: performance.now() - t0 };
}

/** Resident memory of the process (every thread's included), in MB. */
function rssMb(): number {
  return process.memoryUsage().rss / 1048576;
}

async function until(check: () => boolean, deadlineMs: number): Promise<boolean> {
  const end = Date.now() + deadlineMs;
  while (!check()) {
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
  return true;
}

describe('the time limit holds from outside (item 2)', () => {
  it('stops a loop of heavy built-ins at its limit: 4 s of "x".repeat(1 MB) under timeMs 1000', async () => {
    const p = await pool();
    const { value, ms } = await timed(() =>
      p.run(
        'const t0 = Date.now(); let i = 0; while (Date.now() - t0 < 4000) { "x".repeat(1 << 20); i++; } return { observation: i };',
        host().h,
        {
          timeMs: 1_000,
        },
      ),
    );
    expect(scriptError(value).limit).toBe('time');
    expect(value.kind === 'script_error' && value.message).toMatch(/more than 1000 ms \(time limit\)/);
    // Before: it ran its full 4 s.
    expect(ms).toBeLessThan(3_500);
  });

  it('stops 3,000 × "x".repeat(8 MB) at its limit and the next script runs', async () => {
    const p = await pool();
    const { h } = host();
    const { value, ms } = await timed(() =>
      p.run('for (let i = 0; i < 3000; i++) "x".repeat(8 << 20); return { observation: 1 };', h, { timeMs: 1_000 }),
    );
    expect(scriptError(value).limit).toBe('time');
    // Before: 160 s. Now the time limit, the watchdog's grace and one look (a loaded machine adds to each).
    expect(ms).toBeLessThan(5_000);
    expect(p.stats().threadsStopped).toBe(1);
    const next = await p.run('return { observation: call_tool("demo__read", { n: 2 }) };', h);
    expect(observation(next)).toEqual({ n: 2 });
  });
});

describe('memoryMb bounds memory, and it is given back (item 3)', () => {
  it.each([
    ['96 × 1 MB ArrayBuffers', 96],
    ['2,042 × 1 MB ArrayBuffers', 2042],
  ])('%s under memoryMb 64: out of memory', async (_what, n) => {
    const p = await pool();
    const out = await p.run(
      `const k = []; for (let i = 0; i < ${n}; i++) k.push(new ArrayBuffer(1 << 20)); return { observation: k.length };`,
      host().h,
      {
        timeMs: 30_000,
        memoryBytes: 64 * 1024 * 1024,
      },
    );
    const e = scriptError(out);
    expect(e.limit).toBe('memory');
    expect(e.message).toMatch(/out of memory/);
  });

  it('endless arrays reach the memory limit (or the time limit) within the time limit, not after 14-21 s', async () => {
    const p = await pool();
    const { value, ms } = await timed(() =>
      p.run('const a = []; for (;;) a.push(new Array(1e5).fill(a.length));', host().h, { timeMs: 2_000, memoryBytes: 64 * 1024 * 1024 }),
    );
    expect(['memory', 'time']).toContain(scriptError(value).limit);
    expect(ms).toBeLessThan(4_000);
  });

  it('gives the memory of a script that used 200 MB back when it ends', async () => {
    const p = await pool();
    const before = rssMb();
    let peak = 0;
    const sampler = setInterval(() => (peak = Math.max(peak, rssMb())), 20);
    const out = await p.run(
      'const k = []; for (let i = 0; i < 200; i++) { const b = new Uint8Array(1 << 20); b.fill(1); k.push(b); } return { observation: k.length };',
      host().h,
      { timeMs: 60_000, memoryBytes: 256 * 1024 * 1024 },
    );
    clearInterval(sampler);
    expect(observation(out)).toBe(200);
    expect(peak - before, 'the script did hold its 200 MB').toBeGreaterThan(150);
    // Before: the process stayed at its peak. Now the thread that held it is retired.
    const back = await until(() => rssMb() - before < 60, 10_000);
    expect(back, `RSS ${rssMb().toFixed(0)} MB, ${before.toFixed(0)} MB before, ${peak.toFixed(0)} MB at the peak`).toBe(true);
    expect(p.stats().threadsRetired).toBe(1);
  });
});

describe('the result limit (item 4)', () => {
  it('a 50 MB tagged result gets the output-limit error, not "[object Object]"', async () => {
    const out = scriptError(
      await (await pool()).run('return { observation: "x".repeat(50 * 1024 * 1024) };', host().h, { timeMs: 30_000 }),
    );
    expect(out.limit).toBe('output');
    expect(out.message).toMatch(/output limit/);
    expect(out.message).not.toMatch(/object Object/);
  });

  it('a 1 MB one too, with its size', async () => {
    const out = scriptError(await (await pool()).run('return { observation: "x".repeat(1024 * 1024) };', host().h));
    expect(out.limit).toBe('output');
    expect(out.message).toMatch(/is 1048594 characters as JSON; the limit is 262144 \(output limit\)/);
  });
});

describe('the process stays responsive', () => {
  it('its event loop does not stall while a script computes for 3 s (before: 3.0-3.4 s)', async () => {
    const p = await pool();
    const delay = monitorEventLoopDelay({ resolution: 10 });
    delay.enable();
    // Timer drift too: the largest gap between two ticks of a 20 ms interval.
    let ticks = 0;
    let last = performance.now();
    let worstGap = 0;
    const other = setInterval(() => {
      const now = performance.now();
      worstGap = Math.max(worstGap, now - last);
      last = now;
      ticks++;
    }, 20);
    const out = await p.run(
      'const t0 = Date.now(); let i = 0; while (Date.now() - t0 < 3000) i++; return { observation: i > 0 };',
      host().h,
      {
        timeMs: 5_000,
      },
    );
    // Long enough for the histogram and the interval to see a stall that just ended.
    await new Promise((r) => setTimeout(r, 100));
    clearInterval(other);
    delay.disable();
    expect(observation(out)).toBe(true);
    const maxMs = delay.max / 1e6;
    process.stdout.write(
      `[sandbox] event loop while a script computed 3 s: largest delay ${maxMs.toFixed(1)} ms, largest gap between 20 ms ticks ${worstGap.toFixed(1)} ms\n`,
    );
    // The target is under 100 ms; a loaded 2-core machine gets a generous bound.
    expect(maxMs).toBeLessThan(500);
    expect(worstGap).toBeLessThan(500);
    expect(ticks).toBeGreaterThan(50);
  });
});

describe('a thread stopped under its scripts', () => {
  it('runs the other scripts of that thread again elsewhere, each call answered once, the clock and Math.random replayed', async () => {
    const p = await pool(1);
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    const { h, calls } = host(async (c) => {
      if (c.index === 0) await gate;
      return { ok: c.args };
    });
    const recorded: number[] = [];
    h.record = (v) => recorded.push(...v.random);
    // Waits on its first call while the heavy script next to it is stopped with its thread.
    const patient = p.run(
      'const r = Math.random(); const a = call_tool("demo__read", { r }); const b = call_tool("demo__write", { r: Math.random() }); return { observation: [r, a.r, b.r] };',
      h,
      { timeMs: 10_000 },
    );
    await until(() => calls.length === 1, 10_000);
    const heavy = await p.run('for (let i = 0; i < 3000; i++) "x".repeat(8 << 20); return { observation: 1 };', host().h, { timeMs: 500 });
    expect(scriptError(heavy).limit).toBe('time');
    expect(p.stats()).toMatchObject({ threadsStopped: 1, reruns: 1 });
    release();
    const out = await patient;
    const [r, a, b] = observation(out) as number[];
    expect(a).toBe(r);
    expect(calls.map((c) => [c.name, c.index])).toEqual([
      ['demo__read', 0],
      ['demo__write', 1],
    ]);
    expect(recorded).toEqual([r, b]);
  });

  it('a thread lost under a script (for no reason it knows): the script runs again, each call once; lost twice, it ends', async () => {
    const p = await pool(1);
    const threads = () => (p as unknown as { threads: { worker: { terminate(): Promise<number> } }[] }).threads;
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    const { h, calls } = host(async (c) => {
      if (c.index === 1) await gate;
      return { ok: c.index };
    });
    const run = p.run('const a = call_tool("demo__read", {}); const b = call_tool("demo__write", {}); return { observation: [a, b] };', h);
    await until(() => calls.length === 2, 10_000);
    await threads()[0]!.worker.terminate();
    await until(() => p.stats().threadsLost === 1 && threads().length === 1, 10_000);
    release();
    const out = await run;
    expect(observation(out)).toEqual([0, 1]);
    expect(calls.map((c) => c.index)).toEqual([0, 1]);

    // Lost twice while it computes after its call: it ends, its call made once.
    const again = host();
    const twice = p.run('call_tool("demo__read", {}); for (;;) {}', again.h, { timeMs: 60_000 });
    const computing = () => (threads()[0] as unknown as { running?: Float64Array } | undefined)?.running?.[0] ?? -1;
    for (let lost = 2; lost <= 3; lost++) {
      await until(() => again.calls.length === 1 && computing() >= 0, 10_000);
      await threads()[0]!.worker.terminate();
      await until(() => p.stats().threadsLost === lost, 10_000);
    }
    const e = scriptError(await twice);
    expect(e.message).toMatch(/sandbox thread running the script stopped .*again after the script was run anew/);
    expect(again.calls).toHaveLength(1);
  });

  it('a tool answer too large to cross is an error the script sees, and the thread lives', async () => {
    const p = await pool(1);
    const { h, calls } = host((c) => (c.index === 0 ? { ok: 'y'.repeat(9 * 1024 * 1024) } : { ok: 'small' }));
    const out = await p.run(
      'let seen; try { call_tool("demo__read", {}); } catch (e) { seen = e.name + ": " + e.message; } return { observation: [seen, call_tool("demo__read", {})] };',
      h,
    );
    const [seen, next] = observation(out) as string[];
    expect(seen).toMatch(
      /^ToolError: the result of demo__read is 9437193 characters as JSON; a script may receive at most 8388608 \(memory limit\)/,
    );
    expect(next).toBe('small');
    expect(calls).toHaveLength(2);
    expect(p.stats()).toMatchObject({ threadsLost: 0, threadsStopped: 0 });
  });
});

describe('a run stopped through its signal', () => {
  it('a script computing stops at once', async () => {
    const p = await pool();
    const controller = new AbortController();
    setTimeout(() => controller.abort('cancelled'), 300);
    const { value, ms } = await timed(() =>
      p.run('for (;;) {}', host().h, { timeMs: 10_000 }, { signal: controller.signal }).catch((e: unknown) => e),
    );
    expect(value).toBeInstanceOf(SandboxAborted);
    expect((value as SandboxAborted).cause).toBe('cancelled');
    expect(ms).toBeLessThan(2_000);
  });

  it('a script in a long built-in call: its thread is stopped', async () => {
    const p = await pool();
    const controller = new AbortController();
    setTimeout(() => controller.abort('drain'), 300);
    const { value, ms } = await timed(() =>
      p
        .run('for (let i = 0; i < 3000; i++) "x".repeat(8 << 20);', host().h, { timeMs: 60_000 }, { signal: controller.signal })
        .catch((e: unknown) => e),
    );
    expect(value).toBeInstanceOf(SandboxAborted);
    expect(ms).toBeLessThan(3_000);
    expect(p.stats().threadsStopped).toBe(1);
  });

  it('a script waiting for a tool: the run ends once the call has its answer, and the script makes no other call', async () => {
    const p = await pool();
    const controller = new AbortController();
    let answered = false;
    const { h, calls } = host(async () => {
      controller.abort('cancelled');
      await new Promise((r) => setTimeout(r, 300));
      answered = true;
      return { ok: 1 };
    });
    const err = await p
      .run('call_tool("demo__write", {}); call_tool("demo__write", {}); return { observation: 1 };', h, {}, { signal: controller.signal })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SandboxAborted);
    expect(answered).toBe(true);
    expect(calls).toHaveLength(1);
  });
});
