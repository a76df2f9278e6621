// Samples the process's memory every 250 ms, one JSON line each, into MEMLOG_FILE (default
// /tmp/memlog-<pid>.jsonl): RSS, the V8 heap (total, used, per space) and external memory, in MB.
// For the specialist: BENCH_SPECIALIST_NODE_ARGS="--import ./bench/memlog.mjs". A worker thread
// (the CodeAct sandboxes) samples too, into the same file: its lines have `thread` set.
import { appendFileSync } from 'node:fs';
import { getHeapSpaceStatistics } from 'node:v8';
import { isMainThread, threadId } from 'node:worker_threads';
import { setInterval } from 'node:timers';

const file = process.env.MEMLOG_FILE || `/tmp/memlog-${process.pid}.jsonl`;
const started = Date.now();
const mb = (bytes) => Math.round(bytes / 1048576);
const timer = setInterval(() => {
  const m = process.memoryUsage();
  const spaces = getHeapSpaceStatistics().map((s) => [s.space_name, mb(s.space_used_size), mb(s.space_size)]);
  const line = {
    t: Date.now() - started,
    rss: mb(m.rss),
    heapTotal: mb(m.heapTotal),
    heapUsed: mb(m.heapUsed),
    external: mb(m.external),
    arrayBuffers: mb(m.arrayBuffers),
    spaces,
  };
  if (!isMainThread) line.thread = threadId;
  appendFileSync(file, `${JSON.stringify(line)}\n`);
}, 250);
timer.unref();
