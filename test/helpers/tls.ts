import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** PEM files made by {@link makeCertificates}, by path. */
export interface TestCertificates {
  dir: string;
  /** The CA that signs the server and client certificates below. */
  ca: string;
  serverCert: string;
  serverKey: string;
  /** A client certificate signed by `ca`. */
  clientCert: string;
  clientKey: string;
  /** Another CA, which signed nothing the servers use: an "unknown CA" to a client. */
  otherCa: string;
  /** A client certificate signed by `otherCa`: the servers do not trust it. */
  otherClientCert: string;
  otherClientKey: string;
}

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

/** A CA (key + self-signed certificate) named `name` in `dir`. */
function makeCa(dir: string, name: string): void {
  openssl(
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.crt`,
      '-days',
      '2',
      '-subj',
      `/CN=Bosun test ${name}`,
    ],
    dir,
  );
}

/** A key and a certificate `name` signed by CA `ca`, with the given extensions. */
function makeSigned(dir: string, name: string, ca: string, cn: string, extensions: string): void {
  openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`], dir);
  writeFileSync(join(dir, `${name}.ext`), extensions);
  openssl(
    [
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      `${ca}.crt`,
      '-CAkey',
      `${ca}.key`,
      '-CAcreateserial',
      '-out',
      `${name}.crt`,
      '-days',
      '2',
      '-extfile',
      `${name}.ext`,
    ],
    dir,
  );
}

/**
 * Makes a throw-away PKI with `openssl` in `dir/tls`: a CA, a server certificate for 127.0.0.1
 * and localhost, a client certificate, and a second CA with its own client certificate.
 */
export function makeCertificates(dir: string): TestCertificates {
  const tls = join(dir, 'tls');
  mkdirSync(tls, { recursive: true });
  makeCa(tls, 'ca');
  makeCa(tls, 'other-ca');
  makeSigned(tls, 'server', 'ca', 'localhost', 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n');
  makeSigned(tls, 'client', 'ca', 'bosun', 'extendedKeyUsage=clientAuth\n');
  makeSigned(tls, 'other-client', 'other-ca', 'intruder', 'extendedKeyUsage=clientAuth\n');
  const p = (f: string) => join(tls, f);
  return {
    dir: tls,
    ca: p('ca.crt'),
    serverCert: p('server.crt'),
    serverKey: p('server.key'),
    clientCert: p('client.crt'),
    clientKey: p('client.key'),
    otherCa: p('other-ca.crt'),
    otherClientCert: p('other-client.crt'),
    otherClientKey: p('other-client.key'),
  };
}

/** Writes `content` to `dir/name` (mode 0600, like a mounted Secret) and returns the path. */
export function secretFile(dir: string, name: string, content: string): string {
  const path = join(dir, name);
  writeFileSync(path, content, { mode: 0o600 });
  return path;
}
