// Usage without client cooperation: a streaming chat or completions request that does not ask
// for usage gets `"stream_options":{"include_usage":true}` inserted on its way to the upstream
// (every other byte of the body as it was), so the engine reports token counts in a final
// usage-only chunk, which is then removed from what the client receives. An explicit
// include_usage (true or false), or a stream_options that is not an object, is left alone;
// `"stream_options":null` (some clients write null for unset fields) counts as absent.
// An engine that states the counts in a stream without being asked needs none of this: the
// current llama-server puts its `timings` (prompt_n, cache_n, predicted_n) on a stream's last
// chunk, and moves them onto the usage-only chunk when usage is asked, so injecting would take
// them from the client. Seen once (a stripped usage-only chunk that carries `timings`), the
// switch stops injecting and the counts are read from the timings (request-timer.ts); a complete
// stream not injected for that which states no counts after all turns injection back on, for good.
import { utf8FromJsonEncoding } from '../stream-tap/json-encoding.ts';
import type { ScanResult } from '../stream-tap/request-body-scanner.ts';

/** How a body had usage injected: held whole (the field inserted first), or streamed through (appended at its end). */
export type InjectedBody = 'held' | 'streamed';

/** The on/off switch of usage injection (the data plane's), as the measured route uses it. */
export interface UsageInjection {
  /**
   * Whether to inject now: on, the upstream has not refused stream_options, and it is not known
   * to state the counts without being asked.
   */
  active(): boolean;
  /**
   * An injected stream's usage-only chunk carried the engine's `timings`: the engine states the
   * counts on its own (the timings move there only when usage is asked). Injection stops, unless
   * it came back on already (countsMissing).
   */
  countsStated(): void;
  /**
   * A complete stream without usage and without timings, on a route that takes stream_options:
   * where injection stopped for countsStated, it is on again until infermeter restarts.
   */
  countsMissing(): void;
  /**
   * Whether the upstream is known to take the field: an injected request was answered 2xx in
   * this process. Only then is a body that streams through (that could not be sent again
   * after a refusal) injected.
   */
  accepted(): boolean;
  /** An injected request was answered 2xx. */
  accept(): void;
  /**
   * Calls `listener` once the upstream is known to take the field, or injection went off (at
   * once if either holds already); returns what cancels it.
   */
  whenAccepted(listener: () => void): () => void;
  /** Whether injection asks for usage on every chunk too (INFERMETER_CONTINUOUS_USAGE). */
  readonly continuous?: boolean;
  /** The upstream refused stream_options: stop injecting, say so once. */
  refused(): void;
  injected(body: InjectedBody): void;
  stripped(bytes: number): void;
}

// With continuous usage (INFERMETER_CONTINUOUS_USAGE) vLLM is also asked for usage on every chunk:
// the members it adds are removed on the way back (usage-strip.ts), as is the usage-only chunk.
const INNER_TEXT = ['"include_usage":true', '"include_usage":true,"continuous_usage_stats":true'];
const FIELD = INNER_TEXT.map((inner) => Buffer.from(`"stream_options":{${inner}}`));
const INNER = INNER_TEXT.map((inner) => Buffer.from(inner));
const OPTIONS = INNER_TEXT.map((inner) => Buffer.from(`{${inner}}`));
const COMMA = Buffer.from(',');
const ONLY_INCLUDE_USAGE = /^\{\s*"include_usage"\s*:\s*(?:true|false)\s*\}$/;

/**
 * The body to send instead, or undefined when nothing is to be injected. `body` is the whole
 * request body the scan was made of.
 */
export function injectUsage(body: Buffer, scan: ScanResult, continuous = false): Buffer | undefined {
  if (!scan.ok || scan.stream !== true) return undefined;
  const c = continuous ? 1 : 0;
  const options = scan.streamOptions;
  if (options === undefined) {
    const at = scan.objectStart + 1;
    // The object has its "stream" member at least: the one inserted first takes a comma.
    return Buffer.concat([body.subarray(0, at), FIELD[c]!, COMMA, body.subarray(at)]);
  }
  if (!options.isObject) {
    if (body.toString('latin1', options.start, options.end).trim() !== 'null') return undefined;
    return Buffer.concat([body.subarray(0, options.start), OPTIONS[c]!, body.subarray(options.end)]);
  }
  // The form clients send: include_usage alone, with no escape. Anything else is parsed.
  if (ONLY_INCLUDE_USAGE.test(body.toString('latin1', options.start, options.end))) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.subarray(options.start, options.end).toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null || 'include_usage' in parsed) return undefined;
  const at = options.start + 1;
  const empty = Object.keys(parsed).length === 0;
  return Buffer.concat(empty ? [body.subarray(0, at), INNER[c]!, body.subarray(at)] : [body.subarray(0, at), INNER[c]!, COMMA, body.subarray(at)]);
}

/** The member a body that streams through gets at its end when it asks for no usage at all. */
const APPENDED = INNER_TEXT.map((inner) => `,"stream_options":{${inner}}`);

/**
 * What to insert before the closing `}` of a body that streams through (`scan` of the whole
 * body), best first: the client's own stream_options merged with include_usage, then ours alone
 * (for when the merged one does not fit); undefined when nothing is to be inserted. The same
 * rules as injectUsage, but appended: the engines take the last of duplicate keys, so the
 * appended member wins over a client's `null` or object. A client's object over MAX_OPTIONS
 * bytes (no text kept) is overridden by ours alone.
 */
export function appendedUsage(scan: ScanResult, continuous = false): string[] | undefined {
  if (!scan.ok || scan.stream !== true) return undefined;
  const c = continuous ? 1 : 0;
  const appended = APPENDED[c]!;
  const options = scan.streamOptions;
  if (options === undefined) return [appended];
  const text = options.text;
  if (!options.isObject) return text?.trim() === 'null' ? [appended] : undefined;
  if (text === undefined) return [appended];
  if (ONLY_INCLUDE_USAGE.test(text)) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null || 'include_usage' in parsed) return undefined;
  if (Object.keys(parsed).length === 0) return [appended];
  return [`,"stream_options":{${INNER_TEXT[c]},${text.slice(1)}`, appended];
}

// What engines say of a field they do not take: pydantic's extra_forbidden ("Extra inputs are
// not permitted", FastAPI's 422 detail and vLLM's 400 message), serde's "unknown field" (TGI's
// 422), OpenAI's "Unrecognized request argument", "unsupported"/"not supported" (llama.cpp's
// style), JSON Schema's additional properties.
const REFUSAL =
  /extra[ _](?:inputs?|fields?)|extra_forbidden|not permitted|not allowed|unknown (?:field|parameter|argument|key|property)|unrecognized|unexpected (?:field|keyword|argument|parameter|property)|not supported|unsupported|additional ?properties|invalid (?:field|parameter|argument)/i;
/** The fields injection adds; an error naming one the client did not write is about ours. */
const INJECTED = ['stream_options', 'include_usage', 'continuous_usage_stats'];
/** How near (characters) a refusal's words and the field it names must be to be one statement. */
const NEAR = 160;

/**
 * Does an upstream's answer to an injected request refuse the injected field? A 400 or 422
 * whose body says a field infermeter added (and the client's `original` body, decoded as the
 * engine decodes it, does not hold: an error naming a field the client wrote is about the
 * client's request) is unknown, extra or unsupported. Any other error (a 404 that echoes a
 * model named "stream_options", a 400 about the client's own fields) is the client's answer.
 * A refusal read so is only suspected: the request is sent again without the field, and
 * injection stays on unless `trustedRefusal` holds too.
 */
export function rejectsStreamOptions(status: number, body: string, original?: Buffer): boolean {
  if (status !== 400 && status !== 422) return false;
  if (!REFUSAL.test(body)) return false;
  const client = original === undefined ? '' : clientText(original);
  return INJECTED.some((field) => body.includes(field) && !client.includes(field));
}

/**
 * Whether a refusal can only have been written by the engine, never echoed from the client:
 * the client's own body (its escapes decoded, in any case) holds neither a word of refusal nor
 * a field infermeter added, so no echo of it can; and the error states the refusal next to the
 * field's name. Only such a refusal, with the re-send without the field succeeding, turns
 * injection off for everyone: a client whose text says "not supported" or "stream_options"
 * (the echo attack) gets its own answer and changes nothing for the others.
 */
export function trustedRefusal(status: number, body: string, original: Buffer): boolean {
  if (!rejectsStreamOptions(status, body, original)) return false;
  const client = clientText(original);
  if (REFUSAL.test(client) || INJECTED.some((field) => client.includes(field))) return false;
  const words = new RegExp(REFUSAL.source, 'gi');
  for (let m = words.exec(body); m !== null; m = words.exec(body)) {
    const from = Math.max(0, m.index - NEAR);
    const near = body.slice(from, m.index + m[0].length + NEAR);
    if (INJECTED.some((field) => near.includes(field))) return true;
  }
  return false;
}

/** A JSON body's text as the engine reads its strings: in UTF-8 (from UTF-16 or UTF-32 too), escapes decoded, lower case. */
function clientText(original: Buffer): string {
  const text = (utf8FromJsonEncoding(original) ?? original).toString('utf8');
  if (!text.includes('\\')) return text.toLowerCase();
  return text
    .replace(/\\(?:u([0-9a-fA-F]{4})|(["\\/bfnrt]))/g, (_, hex: string | undefined, c: string | undefined) =>
      hex !== undefined ? String.fromCharCode(parseInt(hex, 16)) : (({ b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' } as Record<string, string>)[c!] ?? c!),
    )
    .toLowerCase();
}

/**
 * The switch the data plane asks: on until the upstream is found to refuse the field (a refusal
 * whose re-send without it succeeded), then off until infermeter restarts.
 */
export function createInjectionSwitch(
  enabled: boolean,
  report: { active(on: boolean): void; injected(body: InjectedBody): void; stripped(): void },
  warn: (msg: string) => void,
  continuous = false,
): UsageInjection {
  let on = enabled;
  let accepted = false;
  // The engine states the counts without being asked (countsStated); `restored`: it turned out
  // not to, once, and is never believed again (no flapping that loses a count at each turn).
  let stated = false;
  let restored = false;
  const listeners = new Set<() => void>();
  const settled = (): void => {
    const waiting = [...listeners];
    listeners.clear();
    for (const listener of waiting) listener();
  };
  report.active(on);
  return {
    continuous,
    active: () => on && !stated,
    countsStated() {
      if (!on || stated || restored) return;
      stated = true;
      settled(); // a body waiting to learn whether the field is taken streams through uninjected now
      report.active(false);
    },
    countsMissing() {
      if (!on || !stated) return;
      stated = false;
      restored = true;
      report.active(true);
      warn('a stream stated no token counts without usage: usage injection is on again until infermeter restarts');
    },
    accepted: () => on && !stated && accepted,
    accept() {
      if (accepted || !on) return;
      accepted = true;
      settled();
    },
    whenAccepted(listener) {
      if (!on || stated || accepted) {
        listener();
        return ignore;
      }
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    refused() {
      if (!on) return;
      on = false;
      settled();
      if (!stated) report.active(false);
      warn('the upstream refuses stream_options: usage injection is off from now on; streams without usage report 0 tokens');
    },
    injected: (body) => report.injected(body),
    stripped: () => report.stripped(),
  };
}

function ignore(): void {}

/**
 * Whether a client takes an uncompressed answer (RFC 9110 12.5.3: unless it says
 * `identity;q=0`, or `*;q=0` without naming identity). An injected request asks the upstream for
 * one: the usage-only chunk it asked for can only be cut out of bytes it can read.
 */
export function takesIdentity(acceptEncoding: string | undefined): boolean {
  if (acceptEncoding === undefined) return true;
  let star: boolean | undefined;
  for (const part of acceptEncoding.split(',')) {
    const [coding, ...params] = part.split(';');
    const name = coding!.trim().toLowerCase();
    const q = params.map((p) => /^\s*q\s*=\s*([0-9.]+)\s*$/i.exec(p)?.[1]).find((v) => v !== undefined);
    const accepted = q === undefined || Number(q) > 0;
    if (name === 'identity') return accepted;
    if (name === '*') star = accepted;
  }
  return star !== false;
}

/**
 * Makes the request ask for an uncompressed answer: its Accept-Encoding (as the client wrote
 * it, in the raw list the upstream request copies) becomes `identity`. Only for an injected
 * request, whose answer is read and cut: the client, which takes identity, gets the same content
 * uncompressed, and never a usage chunk it did not ask for. A request without Accept-Encoding is
 * left so (servers compress only for a client that names a coding; nothing is added).
 */
export function askIdentity(rawHeaders: string[]): void {
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.length === 15 && rawHeaders[i]!.toLowerCase() === 'accept-encoding') rawHeaders[i + 1] = 'identity';
  }
}
