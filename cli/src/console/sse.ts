/**
 * Run events to the browser as Server-Sent Events, read from the JetStream runs stream the way
 * `bosun watch` reads it (`followEvents`): one run's events replayed from the start and then
 * live, or every run's new events. Each event is one `data:` line of JSON; the page orders a
 * run's events by `seq`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from '@bosun/config';
import { followEvents } from '../events.js';

const HEARTBEAT_MS = 15_000;

/** The open streams, so that closing the console ends them. */
export class EventStreams {
  private readonly open = new Set<AbortController>();

  constructor(
    private readonly nc: NatsConnection,
    private readonly prefix: string,
    private readonly log: Logger,
  ) {}

  /** Streams events to `res` until the client goes away or {@link close}. */
  async serve(req: IncomingMessage, res: ServerResponse, runId: string | undefined): Promise<void> {
    const ac = new AbortController();
    this.open.add(ac);
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', 'x-accel-buffering': 'no' });
    res.write(': bosun console events\n\n');
    const beat = setInterval(() => res.write(': keep-alive\n\n'), HEARTBEAT_MS);
    const stop = () => ac.abort();
    req.on('close', stop);
    try {
      const events = followEvents(this.nc, {
        prefix: this.prefix,
        ...(runId ? { runId } : {}),
        from: runId ? 'start' : 'new',
        signal: ac.signal,
      });
      for await (const e of events) res.write(`data: ${JSON.stringify(e)}\n\n`);
    } catch (err) {
      if (!ac.signal.aborted) this.log.warn({ err, runId }, 'console event stream failed');
    } finally {
      clearInterval(beat);
      req.off('close', stop);
      this.open.delete(ac);
      res.end();
    }
  }

  /** Ends every open stream. */
  close(): void {
    for (const ac of this.open) ac.abort();
  }
}
