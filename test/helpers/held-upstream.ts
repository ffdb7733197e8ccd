// An upstream that answers nothing on its own: each request's response is handed to the test,
// which writes (or withholds) it, so timeouts, queues and drains are provoked by events, not
// timers. Plus a reader of a whole response that tells a clean end from a cut one.
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { TestContext } from 'node:test';
import { listen } from './listen.ts';

export interface HeldRequest {
  readonly body: string;
  readonly res: ServerResponse;
  /** Resolves when the response's connection closes (written to the end, or given up by the proxy). */
  readonly closed: Promise<void>;
}

export interface HeldUpstream {
  readonly url: string;
  /** Requests received, in order, with their responses left to the test. */
  readonly held: readonly HeldRequest[];
  /** Resolves when `n` requests have arrived in all. */
  arrived(n: number): Promise<void>;
  /** Resolves with the response of the next request not yet taken by next(). */
  next(): Promise<ServerResponse>;
}

export async function startHeldUpstream(t: TestContext): Promise<HeldUpstream> {
  const held: HeldRequest[] = [];
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  let taken = 0;
  const server = http.createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const closed = new Promise<void>((resolve) => res.on('close', () => resolve()));
      held.push({ body, res, closed });
      for (const w of waiters.splice(0)) (held.length >= w.n ? w.resolve : () => waiters.push(w))();
    });
  });
  const { url } = await listen(t, server);
  const arrived = (n: number): Promise<void> => (held.length >= n ? Promise.resolve() : new Promise((resolve) => waiters.push({ n, resolve })));
  return {
    url,
    held,
    arrived,
    async next() {
      const i = taken++;
      await arrived(i + 1);
      return held[i]!.res;
    },
  };
}

/** Reads a whole response: the bytes that arrived, and whether it ended cleanly (not cut). */
export async function readToEnd(res: Response): Promise<{ bytes: Buffer; text: string; clean: boolean }> {
  const parts: Buffer[] = [];
  const reader = res.body!.getReader();
  let clean = true;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      parts.push(Buffer.from(value));
    }
  } catch {
    clean = false;
  }
  const bytes = Buffer.concat(parts);
  return { bytes, text: bytes.toString(), clean };
}
