import { Agent, request, type IncomingHttpHeaders } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '@bosun/config';
import { BearerAuth } from './bearer.js';
import { readBody } from './body.js';
import { HttpError, ListenError } from './errors.js';
import { sendError, sendJson } from './json.js';
import { Router } from './router.js';
import { HttpServer, type HttpServerOptions } from './server.js';

// The HTTP toolkit of the operator API, the MCP face and the health server, on real node:http
// servers on free ports.

const lines: Record<string, unknown>[] = [];
const log = createLogger({ service: 'http-unit', level: 'info', destination: { write: (l: string) => void lines.push(JSON.parse(l)) } });
const servers: HttpServer[] = [];

async function serve(handle: HttpServerOptions['handle'], more: Partial<HttpServerOptions> = {}): Promise<HttpServer> {
  const s = await HttpServer.listen({ name: 'unit API', port: 0, host: '127.0.0.1', log, handle, ...more });
  servers.push(s);
  return s;
}

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

/** One request with node:http (so that bodies can be streamed and headers set freely). */
function send(
  port: number,
  options: { method?: string; path?: string; headers?: Record<string, string>; body?: string | string[]; agent?: Agent } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: options.method ?? 'GET',
        path: options.path ?? '/',
        headers: options.headers,
        agent: options.agent,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    for (const chunk of typeof options.body === 'string' ? [options.body] : (options.body ?? [])) req.write(chunk);
    req.end();
  });
}

afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close({ graceMs: 100 })));
  lines.length = 0;
});

describe('BearerAuth', () => {
  const auth = new BearerAuth({ token: 's3cret', realm: 'bosun-gateway' });

  it('tells the right token, no token (or another scheme) and a wrong token apart', () => {
    expect(auth.check('Bearer s3cret')).toBe('ok');
    expect(auth.check('bearer  s3cret ')).toBe('ok');
    expect(auth.check(undefined)).toBe('missing');
    expect(auth.check('')).toBe('missing');
    expect(auth.check('Basic czNjcmV0')).toBe('missing');
    expect(auth.check('Bearer wrong')).toBe('invalid');
    expect(auth.check('Bearer')).toBe('invalid');
    expect(auth.check('Bearer s3cret extra')).toBe('invalid');
    expect(auth.check('Bearer s3cret2')).toBe('invalid');
  });

  it('challenges with the realm, without an error code when no token was sent, with invalid_token for a wrong one (RFC 6750)', () => {
    expect(auth.challenge('missing')).toBe('Bearer realm="bosun-gateway"');
    expect(auth.challenge('invalid')).toMatch(/^Bearer realm="bosun-gateway", error="invalid_token"/);
  });

  it('refuses an empty token', () => {
    expect(() => new BearerAuth({ token: '', realm: 'x' })).toThrow(expect.objectContaining({ code: 'invalid_config' }));
  });

  it('admits the right token; answers anything else 401 with the challenge and the given body, never the token', async () => {
    const api = await serve((req, res) => {
      if (auth.admit(req, res, { error: 'unauthorized' }, { connection: 'close' })) sendJson(res, 200, { ok: true });
    });
    expect(await send(api.port, { headers: { authorization: 'Bearer s3cret' } })).toMatchObject({ status: 200, text: '{"ok":true}\n' });
    const none = await send(api.port, { method: 'POST', body: 'x'.repeat(100_000) });
    expect(none).toMatchObject({ status: 401, text: '{"error":"unauthorized"}\n' });
    expect(none.headers).toMatchObject({ 'www-authenticate': 'Bearer realm="bosun-gateway"', connection: 'close' });
    const wrong = await send(api.port, { headers: { authorization: 'Bearer s3cret!' } });
    expect(wrong.status).toBe(401);
    expect(wrong.headers['www-authenticate']).toMatch(/error="invalid_token"/);
    expect(wrong.text).not.toContain('s3cret');
  });
});

describe('readBody', () => {
  const echo = (max: number) => serve(async (req, res) => sendJson(res, 200, { body: await readBody(req, max) }));

  it('reads a body up to the limit, in as many chunks as it comes', async () => {
    const api = await echo(10);
    expect(await send(api.port, { method: 'POST', body: ['0123', '45678', '9'] })).toMatchObject({
      status: 200,
      text: '{"body":"0123456789"}\n',
    });
    expect(await send(api.port, { method: 'POST' })).toMatchObject({ status: 200, text: '{"body":""}\n' });
  });

  it('answers 413 past the limit, declared or streamed, and closes the connection', async () => {
    const api = await echo(10);
    const declared = await send(api.port, { method: 'POST', body: '01234567890' });
    expect(declared).toMatchObject({ status: 413, text: '{"error":"request body larger than 10 bytes"}\n' });
    expect(declared.headers.connection).toBe('close');
    // Chunked: no content-length, the limit is found while reading.
    const streamed = await send(api.port, { method: 'POST', headers: { 'transfer-encoding': 'chunked' }, body: ['012345', '67890'] });
    expect(streamed.status).toBe(413);
    expect(streamed.headers.connection).toBe('close');
  });
});

describe('sendJson and sendError', () => {
  it('answer one line of JSON, not cached, with its length; headers may be added', async () => {
    const api = await serve((req, res) =>
      req.url === '/e' ? sendError(res, 409, 'taken', { 'x-why': 'test' }) : sendJson(res, 201, { é: [1] }),
    );
    const ok = await send(api.port);
    expect(ok).toMatchObject({ status: 201, text: '{"é":[1]}\n' });
    expect(ok.headers).toMatchObject({
      'content-type': 'application/json; charset=utf-8',
      'cache-control': 'no-store',
      'content-length': '11',
    });
    expect(await send(api.port, { path: '/e' })).toMatchObject({ status: 409, text: '{"error":"taken"}\n', headers: { 'x-why': 'test' } });
  });
});

describe('Router', () => {
  const router = new Router()
    .on('GET', '/items', ({ res, query }) => sendJson(res, 200, { list: query.get('limit') }))
    .on('GET', '/items/:id', ({ res, params }) => sendJson(res, 200, { get: params.id }))
    .on('POST', '/items/:id', ({ res, params }) => sendJson(res, 200, { post: params.id }))
    .on(['GET', 'HEAD'], '/ping', ({ res }) => sendJson(res, 200, { pong: true }))
    .on('*', '/any', ({ req, res }) => sendJson(res, 200, { method: req.method }));

  it('routes by method and path, with decoded params and the query', async () => {
    const api = await serve((req, res) => router.handle(req, res));
    expect((await send(api.port, { path: '/items?limit=3' })).text).toBe('{"list":"3"}\n');
    expect((await send(api.port, { path: '/items/a%2Fb' })).text).toBe('{"get":"a/b"}\n');
    expect((await send(api.port, { path: '/items/7', method: 'POST' })).text).toBe('{"post":"7"}\n');
    expect((await send(api.port, { path: '//items/7/' })).text).toBe('{"get":"7"}\n');
    expect((await send(api.port, { path: '/ping', method: 'HEAD' })).status).toBe(200);
    expect((await send(api.port, { path: '/any', method: 'DELETE' })).text).toBe('{"method":"DELETE"}\n');
  });

  it('answers 405 with Allow for a known path and another method, 404 for an unknown path or a param that does not decode', async () => {
    const api = await serve((req, res) => router.handle(req, res));
    const put = await send(api.port, { path: '/items/7', method: 'PUT', body: 'x' });
    expect(put).toMatchObject({ status: 405, text: '{"error":"method PUT not allowed"}\n' });
    expect(put.headers.allow).toBe('GET, POST');
    expect((await send(api.port, { path: '/items', method: 'POST' })).headers.allow).toBe('GET');
    for (const path of ['/', '/nowhere', '/items/7/more', '/items/%E0%A4%A'])
      expect(await send(api.port, { path }), path).toMatchObject({ status: 404, text: '{"error":"not found"}\n' });
  });

  it('answers an unknown path with the notFound it was given', async () => {
    const own = new Router({ notFound: (_req, res, path) => sendJson(res, 404, { missing: path }) }).on('GET', '/x', ({ res }) =>
      sendJson(res, 200, {}),
    );
    const api = await serve((req, res) => own.handle(req, res));
    expect(await send(api.port, { path: '/y?q=1' })).toMatchObject({ status: 404, text: '{"missing":"/y"}\n' });
  });
});

describe('HttpServer', () => {
  it('answers an HttpError with its status and headers, anything else 500 (logged, without detail)', async () => {
    const api = await serve((req) => {
      if (req.url === '/bad') throw new HttpError(400, 'limit: must be an integer', { headers: { 'x-field': 'limit' } });
      return Promise.reject(new Error('the database is on fire'));
    });
    const bad = await send(api.port, { path: '/bad' });
    expect(bad).toMatchObject({ status: 400, text: '{"error":"limit: must be an integer"}\n', headers: { 'x-field': 'limit' } });
    expect(new HttpError(400, 'x').code).toBe('bad_request');
    const failed = await send(api.port, { path: '/boom?token=1' });
    expect(failed).toMatchObject({ status: 500, text: '{"error":"internal error"}\n' });
    const logged = lines.find((l) => l.msg === 'unit API request failed');
    expect(logged).toMatchObject({ method: 'GET', path: '/boom', err: { message: 'the database is on fire' } });
  });

  it('hands failures to its onError when given one', async () => {
    const api = await serve(() => Promise.reject(new Error('nope')), {
      onError: (err, _req, res) => sendJson(res, 502, { wrapped: (err as Error).message }),
    });
    expect(await send(api.port)).toMatchObject({ status: 502, text: '{"wrapped":"nope"}\n' });
  });

  it('fails to listen on a port in use with a ListenError naming host:port', async () => {
    const first = await serve(() => undefined);
    const err = await HttpServer.listen({ name: 'second API', port: first.port, host: '127.0.0.1', log, handle: () => undefined }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ListenError);
    expect(err).toMatchObject({
      code: 'address_in_use',
      message: `second API: cannot listen on 127.0.0.1:${first.port}: the address is already in use`,
    });
    expect((err as ListenError).cause).toMatchObject({ code: 'EADDRINUSE' });
  });

  it('closes an idle keep-alive connection at once, not after the grace', async () => {
    const api = await serve((_req, res) => sendJson(res, 200, {}));
    const agent = new Agent({ keepAlive: true });
    try {
      const first = await send(api.port, { agent });
      expect(first.headers.connection).toBe('keep-alive');
      const started = Date.now();
      await api.close({ graceMs: 20_000 });
      expect(Date.now() - started).toBeLessThan(5_000);
      await expect(send(api.port)).rejects.toThrow(/ECONNREFUSED/);
    } finally {
      agent.destroy();
    }
  });

  it('ends a request still open after the grace', async () => {
    let entered: () => void = () => undefined;
    const inHandler = new Promise<void>((r) => (entered = r));
    const api = await serve(async () => {
      entered();
      await new Promise(() => undefined);
    });
    const answer = send(api.port).then(
      (a) => a,
      (e: unknown) => e,
    );
    await inHandler;
    const started = Date.now();
    await api.close({ graceMs: 300 });
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    expect(await answer).toMatchObject({ code: 'ECONNRESET' });
  });

  it('lets an open request finish within the grace, then ends its keep-alive connection at once', async () => {
    let release: () => void = () => undefined;
    const held = new Promise<void>((r) => (release = r));
    let entered: () => void = () => undefined;
    const inHandler = new Promise<void>((r) => (entered = r));
    const api = await serve(async (_req, res) => {
      entered();
      await held;
      sendJson(res, 200, { done: true });
    });
    const answer = send(api.port);
    await inHandler;
    const closed = api.close({ graceMs: 10_000 });
    release();
    const answered = await answer;
    expect(answered).toMatchObject({ status: 200, text: '{"done":true}\n' });
    expect(answered.headers.connection).toBe('close');
    const started = Date.now();
    await closed;
    // Not the keep-alive timeout (5 s) nor the grace: the connection ends with its answer.
    expect(Date.now() - started).toBeLessThan(2_500);
  });
});
