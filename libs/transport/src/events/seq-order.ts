import type { RunEvent } from '@bosun/contract';

/**
 * Puts one run's events back in `seq` order. Events of one run come from several processes, so
 * the stream may hold them slightly out of order; `seq` is the run's order (see docs/protocol.md).
 * Used by `bosun watch` and the A2A server's streams.
 */
export class SeqOrder {
  private next = 1;
  private readonly held = new Map<number, RunEvent>();

  /** Takes an event; returns the events now ready, in order (none while an earlier one is missing). */
  push(e: RunEvent): RunEvent[] {
    if (e.seq < this.next || this.held.has(e.seq)) return [];
    this.held.set(e.seq, e);
    const ready: RunEvent[] = [];
    for (let h = this.held.get(this.next); h; h = this.held.get(this.next)) {
      ready.push(h);
      this.held.delete(this.next);
      this.next++;
    }
    return ready;
  }

  /** Whether events wait for an earlier one. */
  get gapped(): boolean {
    return this.held.size > 0;
  }

  /** Gives up on the missing events: returns what is held, in order, and the seqs skipped. */
  skipGap(): { ready: RunEvent[]; missing: number[] } {
    const ready = [...this.held.values()].sort((a, b) => a.seq - b.seq);
    const missing: number[] = [];
    for (const e of ready) {
      for (let s = this.next; s < e.seq; s++) missing.push(s);
      this.next = e.seq + 1;
    }
    this.held.clear();
    return { ready, missing };
  }
}
