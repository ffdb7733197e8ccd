// The `identified` phase of a chat or completions request while usage injection is on: its
// body held whole (request-body.ts), read, and sent with `stream_options.include_usage`
// inserted when it streams without asking for usage (usage-injection.ts), or as it came; the
// client's own body is kept on the exchange for the re-send after a refusal
// (upstream-attempt.ts). A body that cannot be held (past the inspection cap, or past the budget
// for held bodies or its client's part of it) streams through, read on the way, and has usage
// asked for at its end once the upstream is known to take the field (streamed-injection.ts);
// before that, one past the budget waits for room or for that to be known, then is refused.
// Content-Encoding does not stop the read: the engines read the bytes as JSON whatever the
// header says, and so does infermeter; bytes that are not JSON, with a coding named, are
// counted `encoded` and forwarded as they came.
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import { utf8FromJsonEncoding } from '../stream-tap/json-encoding.ts';
import { scanWhole, type ScanResult } from '../stream-tap/request-body-scanner.ts';
import { namesCoding, withCoding } from '../stream-tap/request-tap.ts';
import type { BodyHold, HeldBodyUse } from './body-budget.ts';
import type { Exchange } from './exchange.ts';
import { holdBody, type Unheld, type UnheldWhy } from './request-body.ts';
import type { StreamedBody } from './streamed-injection.ts';
import type { SizedStream } from './upstream-request.ts';
import { askIdentity, injectUsage, takesIdentity, type UsageInjection } from './usage-injection.ts';

interface InjectedRequestOptions {
  readonly maxInspectBytes: number;
  readonly usageInjection?: UsageInjection | undefined;
  /** Counts bodies not held because the budget was spent, by what holding was for. */
  readonly bodyUnheld?: ((use: HeldBodyUse) => void) | undefined;
}

/**
 * Reads `req`'s body, identifies the exchange by it, and hands `send` the body to forward; or
 * `refuse` when it could not be held in time (the route answers 503).
 */
export function holdAndInject(
  req: IncomingMessage,
  exchange: Exchange,
  hold: BodyHold,
  options: InjectedRequestOptions,
  send: (body: Buffer | SizedStream) => void,
  refuse: () => void,
): void {
  const injection = options.usageInjection;
  const coded = namesCoding(req);
  let counted = false;
  holdBody(req, options.maxInspectBytes, hold, {
    read: (bytes) => (exchange.bytesIn += bytes),
    unheld: (why) =>
      unheld(req, exchange, injection, why, () => {
        if (counted) return;
        counted = true;
        options.bodyUnheld?.('usage_injection');
      }),
    streamed: (stream, body) => send(sized(req, stream, body)),
    scanned: (scan) => exchange.identify(withCoding(scan, coded)),
    refused: refuse,
    held: (body, read, wide) => {
      // A UTF-16 or UTF-32 body (which Python's json.loads takes) is injected in UTF-8 (read as it is).
      const recoded = wide ? utf8FromJsonEncoding(body) : undefined;
      const scan = recoded === undefined ? read : scanWhole(recoded);
      exchange.identify(withCoding(scan, coded));
      const injectable = !wide || recoded !== undefined;
      const injected =
        injectable && injection?.active() === true && takesIdentity(req.headers['accept-encoding'])
          ? injectUsage(recoded ?? body, scan, injection.continuous === true)
          : undefined;
      if (injected === undefined) {
        send(body);
        return;
      }
      // A compressed answer could not have the usage chunk cut out.
      askIdentity(req.rawHeaders);
      injection?.injected('held');
      exchange.inject(body);
      exchange.continuousAsked = namesContinuous(scan);
      send(injected);
    },
  });
}

/**
 * How a body that cannot be held goes on. Injection on, the client taking an uncompressed
 * answer, and the upstream known to take the field: streamed with usage asked for at its end
 * (the answer asked uncompressed now, as the head goes). Not known yet: one that could never be
 * held streams uninjected, one past the budget for now waits. Injection off: as it came.
 */
function unheld(req: IncomingMessage, exchange: Exchange, injection: UsageInjection | undefined, why: UnheldWhy, overBudget: () => void): Unheld {
  if (why !== 'too_large') overBudget();
  const active = injection?.active() === true && takesIdentity(req.headers['accept-encoding']);
  if (active && why === 'over_budget' && !injection.accepted()) return { wait: (settled) => injection.whenAccepted(settled) };
  const inject = active && injection.accepted();
  if (inject) askIdentity(req.rawHeaders);
  return {
    reserve: inject && req.headers['content-length'] !== undefined,
    continuous: injection?.continuous === true,
    // At the body's end: still on, and no answer begun (an answer before the body's end would not be stripped).
    inject: () => inject && injection.active() && exchange.upstreamResponse === undefined,
    injected: (scan) => {
      injection?.injected('streamed');
      exchange.inject(undefined);
      exchange.continuousAsked = namesContinuous(scan);
    },
  };
}

/** The stream to send, with the length the upstream is told when the client gave one. */
function sized(req: IncomingMessage, stream: Readable, body: StreamedBody): SizedStream {
  const length = req.headers['content-length'];
  if (length === undefined) return stream;
  return Object.assign(stream, { contentLength: Number(length) + body.reserved() });
}

/** Whether the client's own stream_options (its text, as far as kept) names continuous_usage_stats. */
function namesContinuous(scan: ScanResult): boolean {
  return scan.ok && scan.streamOptions?.text?.includes('continuous_usage_stats') === true;
}
