// The hardening settings: TLS on each plane and to the upstream, the bearer token of the
// management and metrics ports, the every-address allowance. Read and checked with the rest of the configuration: a certificate that cannot be read, or does not
// go with its key, stops the start with a message that names the variable. (The limits and
// timeouts are rows of the variables table, Config.limits; the every-address refusal is
// listen-addresses.ts'.)
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { createSecureContext } from 'node:tls';
import type { MindieServerConfig } from './parse/mindie-config.ts';
import { nonEmpty as trimmed, switchWord, type Env, type Problem } from './parse/parse.ts';

/** Key, certificate chain and passphrase of one TLS listener, read at start. */
export interface TlsFiles {
  readonly key: Buffer;
  readonly cert: Buffer;
  readonly passphrase: string | undefined;
}

export interface Security {
  /** TLS of the data plane, the management port and the metrics port (undefined: plain HTTP). */
  readonly dataTls: TlsFiles | undefined;
  readonly managementTls: TlsFiles | undefined;
  readonly metricsTls: TlsFiles | undefined;
  /** CA certificates trusted for an https:// upstream, besides the system's. */
  readonly upstreamCa: Buffer | undefined;
  readonly allowAllZeroIp: boolean;
  /** Bearer token of the management and metrics ports (undefined: none required). */
  readonly metricsToken: string | undefined;
  /** Said at start, not refused: certificates outside their validity period. */
  readonly warnings: readonly StartWarning[];
}

interface StartWarning {
  readonly msg: string;
  readonly fields: Readonly<Record<string, string>>;
}

interface Reader {
  readonly env: Env;
  /** Where certificates outside their validity period are noted (parseSecurity collects them). */
  readonly warn?: (warning: StartWarning) => void;
  readonly file: MindieServerConfig;
  /** Folder of the MindIE config file: its relative paths start there. */
  readonly fileDir: string | undefined;
  readonly readFile: (path: string) => Buffer;
  readonly problem: Problem;
}

/** A switch of the variables or config.json; blank is off. */
function bool(value: string | number | boolean | undefined): boolean | undefined {
  if (value === undefined) return undefined;
  const v = String(value).trim();
  return v === '' ? false : switchWord(v);
}

/** One listener's TLS files: the variables first, then (with httpsEnabled) the config file's keys. */
function tls(
  r: Reader,
  prefix: string,
  fileKeys: readonly [cert: keyof MindieServerConfig, key: keyof MindieServerConfig, pwd: keyof MindieServerConfig],
  httpsEnabled: boolean,
): TlsFiles | undefined {
  const fromFile = (k: keyof MindieServerConfig): string | undefined => {
    const v = r.file[k];
    if (typeof v !== 'string' || v.trim() === '') return undefined;
    return r.fileDir !== undefined && !isAbsolute(v) ? join(r.fileDir, v) : v;
  };
  const certVar = `${prefix}_TLS_CERT`;
  const keyVar = `${prefix}_TLS_KEY`;
  const pwdVar = `${prefix}_TLS_KEY_PASSPHRASE_FILE`;
  // Each path with where it came from: a problem names the variable, or the config file's key
  // (a variable the operator never set would send them looking in the wrong place).
  const pick = (variable: string, fileKey: keyof MindieServerConfig): { path: string; name: string } | undefined => {
    const set = trimmed(r.env[variable]);
    if (set !== undefined) return { path: set, name: variable };
    const path = httpsEnabled ? fromFile(fileKey) : undefined;
    return path === undefined ? undefined : { path, name: `INFERMETER_CONFIG ServerConfig.${fileKey}` };
  };
  const certAt = pick(certVar, fileKeys[0]);
  const keyAt = pick(keyVar, fileKeys[1]);
  const pwdAt = pick(pwdVar, fileKeys[2]);
  if (certAt === undefined && keyAt === undefined) {
    if (pwdAt !== undefined)
      r.problem(pwdAt.name, `to go with a key: set ${certVar} and ${keyVar} too (a passphrase alone would leave the port in plain HTTP)`, pwdAt.path);
    else if (httpsEnabled)
      r.problem(
        certVar,
        `a certificate for HTTPS (ServerConfig.httpsEnabled is true; set ${certVar} and ${keyVar}, or ServerConfig.${fileKeys[0]} and ${fileKeys[1]})`,
        undefined,
      );
    return undefined;
  }
  if (certAt === undefined || keyAt === undefined) {
    const given = (certAt ?? keyAt)!;
    const missing =
      certAt === undefined
        ? given.name.startsWith('INFERMETER_CONFIG')
          ? `INFERMETER_CONFIG ServerConfig.${fileKeys[0]}`
          : certVar
        : given.name.startsWith('INFERMETER_CONFIG')
          ? `INFERMETER_CONFIG ServerConfig.${fileKeys[1]}`
          : keyVar;
    r.problem(missing, `a PEM file: the certificate and the key go together (${given.name} is set)`, undefined);
    return undefined;
  }
  const read = (at: { path: string; name: string }, what: string): Buffer | undefined => {
    try {
      return r.readFile(at.path);
    } catch (error) {
      r.problem(at.name, `${what} (${(error as NodeJS.ErrnoException).code ?? 'read error'})`, at.path);
      return undefined;
    }
  };
  const cert = read(certAt, 'a readable PEM file');
  const key = read(keyAt, 'a readable PEM file');
  let passphrase: string | undefined;
  if (pwdAt !== undefined) {
    const p = read(pwdAt, "a readable passphrase file (the key's passphrase on its first line)");
    passphrase = p?.toString('utf8').replace(/\r?\n$/, '');
  }
  if (cert === undefined || key === undefined) return undefined;
  try {
    createSecureContext({ cert, key, passphrase });
  } catch (error) {
    r.problem(
      certAt.name,
      `a PEM certificate that goes with ${keyAt.name}${pwdAt === undefined ? '' : ` (and its passphrase, ${pwdAt.name})`}: ${(error as Error).message}`,
      certAt.path,
    );
    return undefined;
  }
  warnOutOfValidity(r, certAt.name, certAt.path, cert);
  return { cert, key, passphrase };
}

/** Notes each certificate of a PEM file that is expired or not yet valid now. */
function warnOutOfValidity(r: Reader, variable: string, path: string, pem: Buffer): void {
  for (const p of certificateValidity(pem, Date.now())) {
    r.warn?.({
      msg: p.state === 'expired' ? 'TLS certificate expired: clients will refuse it' : 'TLS certificate not valid yet: clients will refuse it',
      fields: { variable, file: path, subject: p.subject, [p.state === 'expired' ? 'not_after' : 'not_before']: p.date.toISOString() },
    });
  }
}

/** The certificates of a PEM text outside their validity period at `now` (ms), in file order. */
export function certificateValidity(pem: Buffer | string, now: number): Array<{ state: 'expired' | 'not_yet_valid'; subject: string; date: Date }> {
  const out: Array<{ state: 'expired' | 'not_yet_valid'; subject: string; date: Date }> = [];
  for (const block of pem.toString('utf8').match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []) {
    let x509: X509Certificate;
    try {
      x509 = new X509Certificate(block);
    } catch {
      continue; // unreadable blocks are TLS's to refuse (createSecureContext above)
    }
    const subject = x509.subject.replace(/\n/g, ', ');
    if (x509.validToDate.getTime() < now) out.push({ state: 'expired', subject, date: x509.validToDate });
    else if (x509.validFromDate.getTime() > now) out.push({ state: 'not_yet_valid', subject, date: x509.validFromDate });
  }
  return out;
}

export function parseSecurity(reader: Reader): Security {
  const warnings: StartWarning[] = [];
  const r: Reader = { ...reader, warn: (w) => warnings.push(w) };
  const httpsEnabled = bool(r.file.httpsEnabled) === true;
  const dataTls = tls(r, 'INFERMETER', ['tlsCert', 'tlsPk', 'tlsPkPwd'], httpsEnabled);
  const managementTls = tls(r, 'INFERMETER_MANAGEMENT', ['managementTlsCert', 'managementTlsPk', 'managementTlsPkPwd'], httpsEnabled);
  // The metrics port uses its own files when given, else the management port's.
  // Any of its own variables (or config keys) counts: a key without its certificate is refused,
  // never ignored with the port left on the management port's TLS or in plain HTTP.
  const metricsOwn =
    ['INFERMETER_METRICS_TLS_CERT', 'INFERMETER_METRICS_TLS_KEY', 'INFERMETER_METRICS_TLS_KEY_PASSPHRASE_FILE'].some((v) => trimmed(r.env[v]) !== undefined) ||
    (httpsEnabled && (['metricsTlsCert', 'metricsTlsPk', 'metricsTlsPkPwd'] as const).some((k) => typeof r.file[k] === 'string' && r.file[k].trim() !== ''));
  const metricsTls = metricsOwn ? tls(r, 'INFERMETER_METRICS', ['metricsTlsCert', 'metricsTlsPk', 'metricsTlsPkPwd'], httpsEnabled) : managementTls;

  let upstreamCa: Buffer | undefined;
  const caPath = trimmed(r.env.INFERMETER_UPSTREAM_CA_FILE);
  if (caPath !== undefined) {
    try {
      upstreamCa = r.readFile(caPath);
    } catch (error) {
      r.problem('INFERMETER_UPSTREAM_CA_FILE', `a readable PEM file of CA certificates (${(error as NodeJS.ErrnoException).code ?? 'read error'})`, caPath);
    }
  }

  const zeroEnv = trimmed(r.env.INFERMETER_ALLOW_ALL_ZERO_IP);
  const zeroSource = zeroEnv ?? r.file.allowAllZeroIpListening;
  const zero = zeroSource === undefined ? false : bool(zeroSource);
  if (zero === undefined)
    r.problem(
      zeroEnv !== undefined ? 'INFERMETER_ALLOW_ALL_ZERO_IP' : 'INFERMETER_CONFIG ServerConfig.allowAllZeroIpListening',
      '1 or 0 (also true/false)',
      String(zeroSource),
    );

  let metricsToken = trimmed(r.env.INFERMETER_METRICS_TOKEN);
  const tokenFile = trimmed(r.env.INFERMETER_METRICS_TOKEN_FILE);
  if (metricsToken === undefined && tokenFile !== undefined) {
    try {
      metricsToken = trimmed(r.readFile(tokenFile).toString('utf8'));
      if (metricsToken === undefined) r.problem('INFERMETER_METRICS_TOKEN_FILE', 'a file holding the token', tokenFile);
    } catch (error) {
      r.problem('INFERMETER_METRICS_TOKEN_FILE', `a readable file holding the token (${(error as NodeJS.ErrnoException).code ?? 'read error'})`, tokenFile);
    }
  }
  if (metricsToken !== undefined && !/^[\x21-\x7e]{16,4096}$/.test(metricsToken)) {
    // Shown as a length only: a token never reaches a message.
    r.problem(
      trimmed(r.env.INFERMETER_METRICS_TOKEN) !== undefined ? 'INFERMETER_METRICS_TOKEN' : 'INFERMETER_METRICS_TOKEN_FILE',
      'a token of 16 to 4096 printable characters, no spaces',
      `${metricsToken.length} characters`,
    );
    metricsToken = undefined;
  }

  return {
    dataTls,
    managementTls,
    metricsTls,
    upstreamCa,
    allowAllZeroIp: zero === true,
    metricsToken,
    warnings,
  };
}

export const readBuffer = (path: string): Buffer => readFileSync(path);
