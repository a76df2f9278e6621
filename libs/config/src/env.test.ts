import { describe, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import { createLogger, setLogLevel } from './logger.js';
import { ENV_VARS, readEnv } from './env.js';

/** An environment that records every variable read from it. */
function recording(values: Record<string, string> = {}): { env: NodeJS.ProcessEnv; read: Set<string> } {
  const read = new Set<string>();
  const env = new Proxy(values, {
    get(target, key) {
      if (typeof key === 'string') read.add(key);
      return Object.hasOwn(target, key) ? target[key as string] : undefined;
    },
  });
  return { env, read };
}

describe('ENV_VARS, the documented list of variables', () => {
  it('is exactly what readEnv reads: every documented variable, and none other', () => {
    const { env, read } = recording();
    readEnv(env);
    expect([...read].sort()).toEqual(Object.keys(ENV_VARS).sort());
  });

  it('marks the secrets, and the variables only the CLI uses', () => {
    const secrets = Object.entries(ENV_VARS)
      .filter(([, d]) => d.secret)
      .map(([n]) => n);
    expect(secrets.sort()).toEqual([
      'ANTHROPIC_API_KEY',
      'BOSUN_TOKEN',
      'GEMINI_API_KEY',
      'NATS_PASSWORD',
      'NATS_TOKEN',
      'OPENAI_API_KEY',
      'REDIS_PASSWORD',
    ]);
    expect(
      Object.entries(ENV_VARS)
        .filter(([, d]) => d.cliOnly)
        .map(([n]) => n),
    ).toEqual(['USER', 'BOSUN_TOKEN']);
  });
});

describe('readEnv', () => {
  it('reads the settings runService and the CLI use, into a frozen object', () => {
    const env = readEnv({ BOSUN_GRACE_MS: '5000', BOSUN_HEALTH_PORT: '9464', USER: ' alice ', LOG_LEVEL: 'warn' });
    expect(env).toMatchObject({ graceMs: 5000, healthPort: 9464, user: 'alice', logLevel: 'warn' });
    expect(Object.isFrozen(env)).toBe(true);
    expect(readEnv({})).toMatchObject({ graceMs: undefined, healthPort: undefined, user: undefined });
    expect(readEnv({ USER: '  ', BOSUN_HEALTH_PORT: '' })).toMatchObject({ user: undefined, healthPort: undefined });
  });

  it.each([
    [{ BOSUN_GRACE_MS: 'abc' }, 'BOSUN_GRACE_MS: "abc" must be a positive number of milliseconds'],
    [{ BOSUN_GRACE_MS: '0' }, 'BOSUN_GRACE_MS: "0" must be a positive number of milliseconds'],
    [{ BOSUN_HEALTH_PORT: '99999' }, 'BOSUN_HEALTH_PORT: "99999" must be a port number'],
    [{ BOSUN_HEALTH_PORT: '80.5' }, 'BOSUN_HEALTH_PORT: "80.5" must be a port number'],
  ])('refuses %o, naming the variable', (vars, message) => {
    expect(() => readEnv(vars)).toThrow(message);
  });
});

describe('setLogLevel', () => {
  it('sets the level LOG_LEVEL names, or info with a warning when it names none', () => {
    const lines: { level: number; msg: string }[] = [];
    const destination = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(JSON.parse(chunk.toString()) as { level: number; msg: string });
        done();
      },
    });
    const log = createLogger({ service: 'env-test', destination });
    setLogLevel(log, 'warn');
    expect(log.level).toBe('warn');
    log.info('quiet');
    setLogLevel(log, 'verbose');
    expect(log.level).toBe('info');
    log.info('loud');
    expect(lines.map((l) => l.msg)).toEqual([expect.stringMatching(/^LOG_LEVEL "verbose" is not a level \(.*\); using info$/), 'loud']);
  });
});
