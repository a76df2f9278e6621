import type { ChildProcess } from 'node:child_process';

// Every process a test starts is killed when the test process exits, even when a test timed out
// before its own clean-up ran: nothing outlives the test file that started it.
const children = new Set<ChildProcess>();
let installed = false;

/** Registers `child` to be SIGKILLed if it is still running when this process exits; returns it, its type (its pipes) kept. */
export function reap<C extends ChildProcess>(child: C): C {
  if (!installed) {
    installed = true;
    process.once('exit', () => {
      for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    });
  }
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}
