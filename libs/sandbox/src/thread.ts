// The errors module alone: the whole contract (its zod schemas) would cost a thread about 0.15 s of CPU to load.
import { errorMessage } from '@bosun/contract/errors';
import { parentPort, workerData } from 'node:worker_threads';
import { Engines, runInEngine, type EngineChannel } from './engine.js';
import type { FromThread, ThreadData, ToThread } from './protocol.js';

// A sandbox thread (a `node:worker_threads` Worker started by SandboxPool): it runs the scripts
// the pool gives it, each in its own interpreter module, and asks the pool for every tool call.
// Its event loop is the one a script blocks; the process's own loop never waits on a script.

const port = parentPort;
if (!port) throw new Error('thread.js runs only as a sandbox thread of a SandboxPool');
const data = workerData as ThreadData;
const engines = new Engines(data.wasm);
const running = new Float64Array(data.control, 0, 2);
const stopFlag = new Int32Array(data.control, 16, 1);
running[0] = -1;

/** Runs waiting for the answer to a call, by id. */
const waiting = new Map<number, (json: string | undefined) => void>();
/** Runs under way, and those of them the pool asked to stop. */
const active = new Set<number>();
const stopped = new Set<number>();

function send(message: FromThread): void {
  port!.postMessage(message);
}

/** What each run printed since its last message. */
const printed = new Map<number, string>();

/** The run's output since its last message, handed over once. */
function takeConsole(id: number): string {
  const text = printed.get(id) ?? '';
  printed.delete(id);
  return text;
}

function channelOf(id: number): EngineChannel {
  return {
    call(index, name, args, values) {
      if (stopped.has(id)) return Promise.resolve(undefined);
      return new Promise((resolve) => {
        waiting.set(id, resolve);
        send({ t: 'call', id, index, name, args, ...values, console: takeConsole(id) });
      });
    },
    log(text) {
      printed.set(id, (printed.get(id) ?? '') + text);
    },
    running(ranMs) {
      // Written so that a reader who sees this id also sees its start.
      running[0] = -1;
      running[1] = Date.now() - ranMs;
      running[0] = id;
    },
    idle() {
      if (running[0] === id) running[0] = -1;
    },
    stopRequested() {
      return stopped.has(id) || Atomics.load(stopFlag, 0) === id;
    },
  };
}

async function run(message: Extract<ToThread, { t: 'run' }>): Promise<void> {
  const { id } = message;
  active.add(id);
  let done: FromThread;
  try {
    const result = await runInEngine(engines, message, channelOf(id));
    done = {
      t: 'done',
      id,
      outcome: result.outcome,
      toolCalls: result.toolCalls,
      ...result.values,
      console: takeConsole(id),
      modules: { created: engines.created, idle: engines.idleCount(), droppedBytes: engines.droppedBytes },
    };
  } catch (err) {
    done = {
      t: 'done',
      id,
      outcome: { kind: 'failed', message: `the sandbox could not run the script: ${errorMessage(err)}` },
      toolCalls: 0,
      clock: [],
      random: [],
      console: takeConsole(id),
      modules: { created: engines.created, idle: engines.idleCount(), droppedBytes: engines.droppedBytes },
    };
  }
  active.delete(id);
  stopped.delete(id);
  waiting.delete(id);
  send(done);
}

port.on('message', (message: ToThread) => {
  switch (message.t) {
    case 'run':
      void run(message);
      return;
    case 'answer': {
      const resolve = waiting.get(message.id);
      waiting.delete(message.id);
      resolve?.(message.json);
      return;
    }
    case 'abort': {
      if (!active.has(message.id)) return;
      stopped.add(message.id);
      // A script waiting for a tool is stopped as soon as it resumes.
      const resolve = waiting.get(message.id);
      waiting.delete(message.id);
      resolve?.(undefined);
      return;
    }
  }
});

// One module ready before the first script, so that it does not pay for the first instance.
engines
  .acquire()
  .then((engine) => {
    engines.release(engine, true);
    send({ t: 'ready' });
  })
  .catch((err: unknown) => send({ t: 'fatal', message: `the interpreter could not be loaded: ${errorMessage(err)}` }));
