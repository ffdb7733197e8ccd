// The `identified` phase of a chat or completions request while usage injection is on: its
// body held whole (request-body.ts), scanned, and sent with `stream_options.include_usage`
// inserted when it streams without asking for usage (usage-injection.ts), or as it came. A body
// past the inspection cap, or one that finds the budget for held bodies spent, is sent as it
// comes, held bytes first. The client's own body is kept on the exchange for the re-send after
// a refusal (upstream-attempt.ts).
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import { utf8FromJsonEncoding } from '../stream-tap/json-encoding.ts';
import { scanWhole } from '../stream-tap/request-body-scanner.ts';
import type { BodyHold, HeldBodyUse } from './body-budget.ts';
import type { Exchange } from './exchange.ts';
import { holdBody } from './request-body.ts';
import { askIdentity, injectUsage, takesIdentity, type UsageInjection } from './usage-injection.ts';

interface InjectedRequestOptions {
  readonly maxInspectBytes: number;
  readonly usageInjection?: UsageInjection | undefined;
  /** Counts bodies not held because the budget was spent, by what holding was for. */
  readonly bodyUnheld?: ((use: HeldBodyUse) => void) | undefined;
}

/** Reads `req`'s body, identifies the exchange by it, and hands `send` the body to forward. */
export function holdAndInject(
  req: IncomingMessage,
  exchange: Exchange,
  hold: BodyHold,
  options: InjectedRequestOptions,
  send: (body: Buffer | Readable) => void,
): void {
  holdBody(req, options.maxInspectBytes, hold, {
    read: (bytes) => (exchange.bytesIn += bytes),
    tooLarge: (body) => {
      exchange.identify({ ok: false, reason: 'too_large' });
      send(body);
    },
    // Not injected, and not replayable; still measured (the scan goes on as it streams).
    overBudget: (body) => {
      options.bodyUnheld?.('usage_injection');
      send(body);
    },
    scanned: (scan) => exchange.identify(scan),
    held: (body, rawScan) => {
      // A UTF-16 or UTF-32 body (which Python's json.loads takes) is read, and injected, in UTF-8.
      const recoded = rawScan.ok ? undefined : utf8FromJsonEncoding(body);
      const scan = recoded === undefined ? rawScan : scanWhole(recoded);
      exchange.identify(scan);
      const injected =
        options.usageInjection?.active() === true && takesIdentity(req.headers['accept-encoding']) ? injectUsage(recoded ?? body, scan) : undefined;
      if (injected === undefined) {
        send(body);
        return;
      }
      // A compressed answer could not have the usage chunk cut out.
      askIdentity(req.rawHeaders);
      options.usageInjection?.injected();
      exchange.inject(body);
      send(injected);
    },
  });
}
