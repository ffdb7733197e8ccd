// A real NATS server with JetStream (Debian's nats-server), for the usage ledger's NATS sink:
// on a free loopback port (freePorts: nats-server takes no port 0),
// its store in a directory of the test's, stopped by its PID in teardown. `stop` and `start`
// again on the same port and store: the server down, then back with what it had stored.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { freePort } from './listen.ts';

const CANDIDATES = ['/usr/sbin/nats-server', '/usr/bin/nats-server'];

/** The nats-server binary, or undefined when none is installed. */
export function natsServerPath(): string | undefined {
  const onPath = spawnSync('sh', ['-c', 'command -v nats-server'], { encoding: 'utf8' }).stdout.trim();
  return onPath !== '' ? onPath : CANDIDATES.find((p) => existsSync(p));
}

/** Skip a test (with why) where nats-server is missing, except under CI, where that fails. */
export const skipWithoutNats = (): string | false =>
  natsServerPath() !== undefined || process.env.CI ? false : 'nats-server not installed (Debian package nats-server; .ci/run installs it)';

export interface NatsServer {
  readonly port: number;
  readonly url: string;
  stop(): Promise<void>;
  start(): Promise<void>;
}

export async function startNatsServer(t: Pick<TestContext, 'after'>): Promise<NatsServer> {
  const binary = natsServerPath();
  if (binary === undefined) throw new Error('nats-server must be installed');
  const store = mkdtempSync(join(tmpdir(), 'infermeter-nats-'));
  const port = await freePort();
  let child: ChildProcess | undefined;
  const start = async (): Promise<void> => {
    const c = spawn(binary, ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', store], { stdio: ['ignore', 'ignore', 'pipe'] });
    child = c;
    let log = '';
    await new Promise<void>((resolve, reject) => {
      c.stderr!.on('data', (d: Buffer) => {
        log += d.toString();
        if (log.includes('Server is ready')) resolve();
      });
      c.once('exit', (code) => reject(new Error(`nats-server exited ${code}: ${log}`)));
    });
  };
  const stop = async (): Promise<void> => {
    const c = child;
    child = undefined;
    if (c === undefined || c.exitCode !== null || c.signalCode !== null) return;
    c.kill('SIGTERM');
    await once(c, 'exit');
  };
  t.after(async () => {
    await stop();
    rmSync(store, { recursive: true, force: true });
  });
  await start();
  return { port, url: `nats://127.0.0.1:${port}`, stop, start };
}
