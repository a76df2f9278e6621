import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { inject } from 'vitest';
import { FaultProxy } from '../helpers/fault-proxy.js';
import { waitUntil } from '../helpers/wait.js';

// The fault layer's own tests: an echo server behind the proxy (and a real Redis for a pattern
// that crosses the wire as a client sends it). Each fault is seen from the client's side.

let echo: Server;
let echoPort = 0;
let proxy: FaultProxy;
const sockets: Socket[] = [];

beforeAll(async () => {
  echo = createServer((s) => {
    // The reset test resets this side too: its ECONNRESET is the fault under test.
    s.on('error', () => undefined);
    s.pipe(s);
  });
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', () => r()));
  const address = echo.address();
  echoPort = typeof address === 'object' && address ? address.port : 0;
});

afterAll(async () => {
  await new Promise<void>((r) => echo.close(() => r()));
});

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await proxy?.close();
});

/** A client of the proxy that collects what comes back, and how it ended. */
async function client(): Promise<{ socket: Socket; received: () => string; ended: () => string | undefined }> {
  const socket = createConnection({ host: '127.0.0.1', port: proxy.port });
  sockets.push(socket);
  let data = '';
  let end: string | undefined;
  socket.on('data', (b: Buffer) => (data += b.toString()));
  socket.on('error', (err: NodeJS.ErrnoException) => (end = err.code ?? err.message));
  socket.on('close', () => (end ??= 'closed'));
  await new Promise<void>((r) => socket.once('connect', () => r()));
  return { socket, received: () => data, ended: () => end };
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('FaultProxy', () => {
  it('forwards both ways while healthy', async () => {
    proxy = await FaultProxy.start({ host: '127.0.0.1', port: echoPort });
    const c = await client();
    c.socket.write('hello');
    await waitUntil(() => c.received() === 'hello', 2_000, 'the echo came back');
    expect(proxy.bytes).toEqual({ up: 5, down: 5 });
    expect(proxy.open).toBe(1);
  });

  it('holds: nothing crosses, nothing closes; heal lets every held byte through in order', async () => {
    proxy = await FaultProxy.start({ host: '127.0.0.1', port: echoPort });
    const c = await client();
    proxy.hold();
    c.socket.write('one,');
    c.socket.write('two');
    await pause(300);
    expect(c.received()).toBe('');
    expect(c.ended()).toBeUndefined();
    proxy.heal();
    await waitUntil(
      () => c.received() === 'one,two',
      2_000,
      () => `the held bytes came back in order (got "${c.received()}")`,
    );
  });

  it('resets: every open connection gets a RST; new ones work', async () => {
    proxy = await FaultProxy.start({ host: '127.0.0.1', port: echoPort });
    const c = await client();
    proxy.reset();
    await waitUntil(() => c.ended() !== undefined, 2_000, 'the client saw its connection end');
    expect(c.ended()).toBe('ECONNRESET');
    const d = await client();
    d.socket.write('again');
    await waitUntil(() => d.received() === 'again', 2_000, 'a new connection works');
  });

  it('blackholes: bytes vanish and nothing closes; after heal the old connection stays dead and a new one works', async () => {
    proxy = await FaultProxy.start({ host: '127.0.0.1', port: echoPort });
    const c = await client();
    proxy.blackhole();
    c.socket.write('lost');
    const during = await client();
    during.socket.write('lost too');
    await pause(300);
    proxy.heal();
    c.socket.write('still lost');
    const d = await client();
    d.socket.write('fine');
    await waitUntil(() => d.received() === 'fine', 2_000, 'a connection made after heal works');
    await pause(200);
    expect([c.received(), during.received()]).toEqual(['', '']);
    expect([c.ended(), during.ended()]).toEqual([undefined, undefined]);
  });

  it('delays every chunk each way', async () => {
    proxy = await FaultProxy.start({ host: '127.0.0.1', port: echoPort });
    const c = await client();
    proxy.delay(150);
    const t0 = Date.now();
    c.socket.write('slow');
    await waitUntil(() => c.received() === 'slow', 2_000, 'the echo came back');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(290);
  });

  it('starts a fault when a pattern crosses, also one cut across two chunks, at its nth crossing; the carrying chunk is the first it applies to', async () => {
    proxy = await FaultProxy.start({ host: '127.0.0.1', port: echoPort });
    const c = await client();
    const held = proxy.when('KEY:42', () => proxy.hold(), { nth: 2 });
    c.socket.write('first KEY:42;');
    await waitUntil(() => c.received() === 'first KEY:42;', 2_000, 'the first crossing passes');
    c.socket.write('second KE');
    await waitUntil(() => c.received().endsWith('second KE'), 2_000, 'the start of the second passes');
    c.socket.write('Y:42 and more');
    await held;
    await pause(200);
    expect(c.received()).toBe('first KEY:42;second KE');
    proxy.heal();
    await waitUntil(() => c.received().endsWith('Y:42 and more'), 2_000, 'the held chunk went through after heal');
  });
});

describe('FaultProxy in front of Redis', () => {
  it('holds the connection at the command that carries a key, and the command runs when it heals', async () => {
    const url = inject('redisUrl');
    proxy = await FaultProxy.start(url, 'redis');
    const redis = new Redis(proxy.url('redis'), { maxRetriesPerRequest: null });
    const direct = new Redis(url);
    const key = `fault-proxy-${Math.random().toString(36).slice(2)}`;
    try {
      await redis.ping();
      const held = proxy.when(key, () => proxy.hold());
      const set = redis.set(key, 'v');
      await held;
      await pause(200);
      expect(await direct.get(key)).toBeNull();
      proxy.heal();
      expect(await set).toBe('OK');
      expect(await direct.get(key)).toBe('v');
    } finally {
      await direct.del(key);
      redis.disconnect();
      direct.disconnect();
    }
  });
});
