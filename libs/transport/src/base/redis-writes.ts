/**
 * One socket write per burst of Redis commands. ioredis writes each command to its socket as it
 * is issued, and every write is a system call; a run's step issues several commands in the same
 * pass of the event loop (a checkpoint, its cancel check, an event's number, BullMQ's own), and
 * on a busy process the system calls were the largest single cost (bench scenario 2's profile:
 * `writeUtf8String`, 18 % of the co-located process's busy time). The connector here opens the
 * same socket as ioredis's own and corks it at the first write of a pass, uncorking it once the
 * pass's microtasks are done (`process.nextTick` queued from a microtask runs after them), so the
 * commands leave in one `writev`, in the order they were issued. Nothing else changes: ioredis
 * still matches replies to commands in order, and a command waits for the socket at most until
 * the end of the pass that issued it.
 */
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import { AbstractConnector } from 'ioredis';
import type { ErrorEmitter } from 'ioredis/built/connectors/AbstractConnector.js';

/** The parts of ioredis's options (after its URL parsing) that say where to connect. */
interface ConnectTo {
  host?: string;
  port?: number;
  path?: string;
  family?: number;
  tls?: ConnectionOptions;
  disconnectTimeout?: number;
}

/**
 * What a pass may hold back before it is sent anyway: a pass that issues more (a burst of
 * thousands of tasks, a large checkpoint) sends it in writes of about this size, so that a burst
 * is never all held in memory at once.
 */
export const COALESCE_MAX_BYTES = 64 * 1024;

/** Makes `socket` send what is written to it in one pass of the event loop as one write (or a few, past {@link COALESCE_MAX_BYTES}). */
export function coalesceWrites(socket: Socket): Socket {
  const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
  let corked = false;
  const release = () => {
    corked = false;
    socket.uncork();
  };
  socket.write = (...args: unknown[]): boolean => {
    if (!corked) {
      corked = true;
      socket.cork();
      process.nextTick(release);
    }
    const ok = write(...args);
    if (socket.writableLength >= COALESCE_MAX_BYTES) {
      // Sent now; the pass goes on corked.
      socket.uncork();
      socket.cork();
    }
    return ok;
  };
  return socket;
}

/**
 * ioredis's connector for one server (the `Connector` option): the socket its standalone
 * connector opens (a Unix socket, TCP, or TLS over TCP), with {@link coalesceWrites}. Given in
 * the options, it is inherited by every `duplicate()` (BullMQ's blocking connections) and by a
 * Cluster's node connections.
 */
export class CoalescingConnector extends AbstractConnector {
  readonly #to: ConnectTo;

  constructor(options: unknown) {
    const to = options as ConnectTo;
    super(to.disconnectTimeout ?? 2_000);
    this.#to = to;
  }

  connect(_: ErrorEmitter): Promise<Socket> {
    const to = this.#to;
    this.connecting = true;
    // As ioredis's own connector: the socket is opened on the next tick, once the caller listens.
    return new Promise((resolve, reject) => {
      process.nextTick(() => {
        if (!this.connecting) {
          reject(new Error('Connection is closed.'));
          return;
        }
        let socket: Socket;
        try {
          const where = to.path
            ? { path: to.path }
            : {
                ...(to.port != null ? { port: to.port } : {}),
                ...(to.host != null ? { host: to.host } : {}),
                ...(to.family != null ? { family: to.family } : {}),
              };
          socket = to.tls ? tlsConnect({ ...where, ...to.tls }) : netConnect(where as Parameters<typeof netConnect>[0]);
        } catch (err) {
          reject(err instanceof Error ? err : new Error(String(err)));
          return;
        }
        socket.once('error', (err: Error) => {
          this.firstError = err;
        });
        this.stream = socket;
        resolve(coalesceWrites(socket));
      });
    });
  }
}
