/**
 * The raw BullMQ view of Bosun's queues: bull-board (its UI served from its package), mounted
 * at /queues behind the console's session, read-only (a change to jobs goes through the console's
 * own actions or the CLI). The queues are found in Redis (`<prefix>:<queue>:meta`, which BullMQ
 * writes for every queue), again at each load of the page, so new specialists' queues appear.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Queue } from 'bullmq';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import express from 'express';
import type { RedisClient } from '@bosun/transport';

/**
 * bull-board's page as far as its options make it accessible (axe-core, critical and serious
 * findings; docs/bull-board-accessibility.md lists what is left for upstream):
 * - `hideRedisDetails`: its Redis button is an icon without a name, around an `<svg role="img">`
 *   without a title; the Redis details it opens are not an operator's concern here.
 * - `theme.light`: the failed-state red, the "No workers" amber, the muted grey of the search
 *   shortcut and the selected queue's teal in the menu are darkened to a contrast of 4.5:1 or
 *   more on their backgrounds (WCAG AA).
 */
const BOARD_UI = {
  boardTitle: 'Bosun queues',
  hideRedisDetails: true,
  theme: {
    light: {
      'status-failed': '#b91c1c',
      'status-waiting': '#b45309',
      'muted-foreground': '#4b5563',
      'sidebar-state-selected-foreground': '#0a4f47',
    },
  },
};

/** Where bull-board is mounted. */
export const QUEUES_PATH = '/queues';

/** The names of the BullMQ queues under `prefix`. */
export async function queueNames(redis: RedisClient, prefix: string): Promise<string[]> {
  const names = new Set<string>();
  let cursor = '0';
  do {
    const [next, found] = await redis.scan(cursor, 'MATCH', `${prefix}:*:meta`, 'COUNT', 500);
    cursor = next;
    for (const key of found) names.add(key.slice(prefix.length + 1, -':meta'.length));
  } while (cursor !== '0');
  return [...names].filter((n) => n !== '' && !n.includes(':')).sort();
}

/** bull-board on an express app, with its queues refreshed from Redis. */
export class QueueBoard {
  private readonly app = express();
  private readonly queues = new Map<string, Queue>();
  private readonly board: ReturnType<typeof createBullBoard>;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
  ) {
    const adapter = new ExpressAdapter();
    adapter.setBasePath(QUEUES_PATH);
    this.board = createBullBoard({ queues: [], serverAdapter: adapter, options: { uiConfig: BOARD_UI } });
    this.app.disable('x-powered-by');
    this.app.use(QUEUES_PATH, adapter.getRouter() as express.Router);
  }

  /** Refreshes the list of queues (on a page load), then lets bull-board answer. */
  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '').split('?')[0]!;
    if (path === QUEUES_PATH || path === `${QUEUES_PATH}/`) await this.refresh();
    this.app(req as express.Request, res as express.Response);
  }

  private async refresh(): Promise<void> {
    for (const name of await queueNames(this.redis, this.prefix))
      if (!this.queues.has(name)) this.queues.set(name, new Queue(name, { connection: this.redis, prefix: this.prefix }));
    this.board.replaceQueues([...this.queues.values()].map((q) => new BullMQAdapter(q, { readOnlyMode: true })));
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((q) => q.close()));
  }
}
