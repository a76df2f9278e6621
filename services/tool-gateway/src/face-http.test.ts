import { describe, expect, it } from 'vitest';

import { allowedOrigins, rebindingRefusal } from './face-http.js';

describe('allowedOrigins and rebindingRefusal (DNS-rebinding protection)', () => {
  const defaults = allowedOrigins({ host: '127.0.0.1', port: 7000 });

  it('by default accepts the loopback names with the face port, with or without a loopback Origin', () => {
    for (const host of ['localhost:7000', '127.0.0.1:7000', '[::1]:7000', 'LocalHost:7000']) {
      expect(rebindingRefusal(defaults, host, undefined)).toBeUndefined();
      expect(rebindingRefusal(defaults, host, `http://${host}`)).toBeUndefined();
    }
  });

  it('refuses another host, another port, a foreign or opaque Origin, and a missing Host', () => {
    expect(rebindingRefusal(defaults, 'evil.example.com', 'http://evil.example.com')).toMatch(/^Forbidden: Host "evil.example.com"/);
    expect(rebindingRefusal(defaults, 'evil.example.com:7000', undefined)).toMatch(/Host/);
    expect(rebindingRefusal(defaults, 'localhost:7001', undefined)).toMatch(/Host/);
    expect(rebindingRefusal(defaults, 'localhost', undefined)).toMatch(/Host/);
    expect(rebindingRefusal(defaults, 'localhost:7000', 'http://evil.example.com')).toMatch(
      /^Forbidden: Origin "http:\/\/evil.example.com"/,
    );
    expect(rebindingRefusal(defaults, 'localhost:7000', 'https://localhost:7000')).toMatch(/Origin/);
    expect(rebindingRefusal(defaults, 'localhost:7000', 'null')).toMatch(/Origin/);
    expect(rebindingRefusal(defaults, undefined, undefined)).toMatch(/Host/);
    expect(rebindingRefusal(defaults, 'user@localhost:7000', undefined)).toMatch(/Host/);
  });

  it('adds a specific listen address to the defaults, never a wildcard one', () => {
    const specific = allowedOrigins({ host: '10.1.2.3', port: 80 });
    expect(rebindingRefusal(specific, '10.1.2.3', 'http://10.1.2.3')).toBeUndefined();
    expect(rebindingRefusal(specific, 'localhost', undefined)).toBeUndefined();
    const v6 = allowedOrigins({ host: 'fd00::1', port: 7000 });
    expect(rebindingRefusal(v6, '[fd00::1]:7000', 'http://[fd00::1]:7000')).toBeUndefined();
    const wildcard = allowedOrigins({ host: '0.0.0.0', port: 7000 });
    expect([...wildcard.hosts].sort()).toEqual(['127.0.0.1:7000', '[::1]:7000', 'localhost:7000']);
    expect(rebindingRefusal(wildcard, '0.0.0.0:7000', undefined)).toMatch(/Host/);
  });

  it('configured values replace the defaults', () => {
    const configured = allowedOrigins({
      host: '0.0.0.0',
      port: 7000,
      allowedHosts: ['mcp.example.org', 'gw:7000'],
      allowedOrigins: ['https://console.example.org'],
    });
    expect(rebindingRefusal(configured, 'mcp.example.org', 'https://console.example.org')).toBeUndefined();
    expect(rebindingRefusal(configured, 'MCP.example.org:80', undefined)).toBeUndefined();
    expect(rebindingRefusal(configured, 'gw:7000', undefined)).toBeUndefined();
    expect(rebindingRefusal(configured, 'localhost:7000', undefined)).toMatch(/Host/);
    expect(rebindingRefusal(configured, 'gw:7000', 'http://localhost:7000')).toMatch(/Origin/);
    expect(() => allowedOrigins({ host: '0.0.0.0', port: 1, allowedHosts: ['http://x/'] })).toThrow(
      /allowedHosts: "http:\/\/x\/" is not a valid value/,
    );
    expect(() => allowedOrigins({ host: '0.0.0.0', port: 1, allowedOrigins: ['x.example.org'] })).toThrow(/allowedOrigins/);
  });
});

// The bearer token check and its challenge are the HTTP toolkit's (BearerAuth): tested in
// libs/transport/src/http/http.test.ts, with the face's realm.
