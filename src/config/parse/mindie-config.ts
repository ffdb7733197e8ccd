// MindIE keeps its listener settings in config.json under ServerConfig; reading that file
// lets infermeter drop into a MindIE deployment with the addresses the operator already wrote.
import { FileRefused, utf8Capped } from './parse.ts';

/** The ServerConfig keys infermeter honours; values are kept raw and validated by config.ts. */
export interface MindieServerConfig {
  readonly ipAddress?: string;
  readonly managementIpAddress?: string;
  readonly port?: string | number;
  readonly managementPort?: string | number;
  readonly metricsPort?: string | number;
  readonly httpsEnabled?: string | number | boolean;
  readonly allowAllZeroIpListening?: string | number | boolean;
  readonly maxLinkNum?: string | number;
  /** TLS files of the three planes; relative paths are taken from the config file's folder. */
  readonly tlsCert?: string;
  readonly tlsPk?: string;
  readonly tlsPkPwd?: string;
  readonly managementTlsCert?: string;
  readonly managementTlsPk?: string;
  readonly managementTlsPkPwd?: string;
  readonly metricsTlsCert?: string;
  readonly metricsTlsPk?: string;
  readonly metricsTlsPkPwd?: string;
}

export type ReadResult = { ok: true; value: MindieServerConfig } | { ok: false; expected: string };

const KEYS = [
  'ipAddress',
  'managementIpAddress',
  'port',
  'managementPort',
  'metricsPort',
  'httpsEnabled',
  'allowAllZeroIpListening',
  'maxLinkNum',
  'tlsCert',
  'tlsPk',
  'tlsPkPwd',
  'managementTlsCert',
  'managementTlsPk',
  'managementTlsPkPwd',
  'metricsTlsCert',
  'metricsTlsPk',
  'metricsTlsPkPwd',
] as const;

// MindIE's own config.json is a few KiB: this bounds what a wrong path can make the start read.
const MAX_FILE_BYTES = 4 * 1024 * 1024;

export function readMindieServerConfig(path: string, readFile: (path: string) => string = utf8Capped(MAX_FILE_BYTES)): ReadResult {
  let text: string;
  try {
    text = readFile(path);
  } catch (error) {
    if (error instanceof FileRefused) return { ok: false, expected: `a MindIE config.json file: ${error.expected}` };
    const code = (error as NodeJS.ErrnoException).code ?? 'read error';
    return { ok: false, expected: `a readable MindIE config.json file (${code})` };
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    return { ok: false, expected: `a JSON file (${(error as Error).message})` };
  }
  if (!isObject(parsed)) return { ok: false, expected: 'a JSON object in MindIE config.json layout' };
  const server = parsed.ServerConfig;
  if (server === undefined) return { ok: true, value: {} };
  if (!isObject(server)) return { ok: false, expected: 'ServerConfig to be a JSON object' };
  const value: Record<string, string | number | boolean> = {};
  for (const key of KEYS) {
    const v = server[key];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean') {
      return { ok: false, expected: `ServerConfig.${key} to be a string, number or boolean` };
    }
    value[key] = v;
  }
  return { ok: true, value };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
