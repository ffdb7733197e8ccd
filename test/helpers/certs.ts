// Certificates for the TLS tests, made with openssl in a temporary folder: a CA, a server
// certificate for 127.0.0.1 signed by it, and the server key also encrypted with a passphrase.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestCerts {
  readonly dir: string;
  readonly caFile: string;
  readonly certFile: string;
  readonly keyFile: string;
  readonly encryptedKeyFile: string;
  readonly passphraseFile: string;
  /** A certificate for the server key, signed by the CA, valid from `start` to `end` (openssl's YYYYMMDDHHMMSSZ). */
  certWithDates(name: string, start: string, end: string): string;
  readonly ca: Buffer;
  readonly cert: Buffer;
  readonly key: Buffer;
  remove(): void;
}

export function makeCerts(): TestCerts {
  const dir = mkdtempSync(join(tmpdir(), 'infermeter-certs-'));
  const f = (name: string) => join(dir, name);
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=infermeter test CA');
  writeFileSync(f('ext.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n');
  ssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=127.0.0.1');
  ssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.pem', '-days', '2', '-extfile', 'ext.cnf');
  writeFileSync(f('pass.txt'), 'correct horse battery staple\n');
  ssl('pkey', '-in', 'server.key', '-aes256', '-passout', 'file:pass.txt', '-out', 'server-encrypted.key');
  return {
    dir,
    caFile: f('ca.pem'),
    certFile: f('server.pem'),
    keyFile: f('server.key'),
    encryptedKeyFile: f('server-encrypted.key'),
    passphraseFile: f('pass.txt'),
    certWithDates(name, start, end) {
      // `openssl ca` is the way OpenSSL 3.0 sets both dates of a certificate.
      writeFileSync(f('index.txt'), '');
      writeFileSync(f('serial'), `${Date.now().toString(16).padStart(16, '0')}\n`);
      writeFileSync(
        f('ca.cnf'),
        '[ca]\ndefault_ca = d\n[d]\ndatabase = index.txt\nnew_certs_dir = .\nserial = serial\ndefault_md = sha256\npolicy = p\nunique_subject = no\n[p]\ncommonName = supplied\n',
      );
      ssl(
        'ca',
        '-batch',
        '-config',
        'ca.cnf',
        '-cert',
        'ca.pem',
        '-keyfile',
        'ca.key',
        '-in',
        'server.csr',
        '-out',
        name,
        '-startdate',
        start,
        '-enddate',
        end,
        '-notext',
      );
      return f(name);
    },
    ca: readFileSync(f('ca.pem')),
    cert: readFileSync(f('server.pem')),
    key: readFileSync(f('server.key')),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
