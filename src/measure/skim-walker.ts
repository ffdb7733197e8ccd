// The response skimmer's cursor (skim-event.ts): one walker, reused for every event, whose steps
// (skim-readers.ts) share the event's bytes, the index of its end and what was read so far, and
// the facts it read, as classifyEvent would report them. Its steps read the bytes through the
// JSON byte module (src/json-bytes/), as the request body scanner does.
import { keyIn, sameBytes } from '../json-bytes/bytes.ts';
import { stringEnd } from '../json-bytes/strings.ts';
import { primitiveEnd, skipValue } from '../json-bytes/values.ts';
import { REASONING, type EventFacts } from './event-facts.ts';

// JSON's bytes as local constants: an imported binding is loaded from its module at each use (bytes.ts).
const COLON = 0x3a;
const COMMA = 0x2c;
const QUOTE = 0x22;

/** Returned by the walk's steps in place of an index: defer to the full classifier (never escapes skimTokenEvent). */
export const DEFER = -1;
/** As readFinishReason (openai-events.ts) cuts it. */
const MAX_FINISH_REASON = 64;

export class SkimWalker {
  b: Uint8Array = new Uint8Array(0);
  end = 0;
  token = false;
  /** Some output was visible (not reasoning only). */
  visible = false;
  sawChoices = false;
  /** Choices seen, delta members seen, and the span of the last string value of a sequence key. */
  choiceCount = 0;
  members = 0;
  valueStart = -1;
  valueEnd = -1;
  /** That string's key is a reasoning key. */
  valueReasoning = false;
  /** The last finish reason's span (-1: none), the model's, and the usage counts (-1: none). */
  finishStart = -1;
  finishEnd = -1;
  modelStart = -1;
  modelEnd = -1;
  usage = false;
  promptTokens = -1;
  inputTokens = -1;
  completionTokens = -1;
  outputTokens = -1;
  cachedTokens = -1;
  cacheHitTokens = -1;
  reasoningTokens = -1;
  /** llama.cpp's timings (-1: not read). */
  promptN = -1;
  promptMs = -1;
  predictedN = -1;
  predictedMs = -1;
  cacheN = -1;
  /** The last count read (skim-readers.ts). */
  count = 0;
  /** Whether after() passed a comma (another member follows) or the container's end. */
  more = false;
  /** The span of the last key read by key(): [keyStart, keyEnd), without its quotes. */
  keyStart = 0;
  keyEnd = 0;

  /** Ready to walk bytes [.., end) of `b`, nothing read yet. */
  reset(b: Uint8Array, end: number): void {
    this.b = b;
    this.end = end;
    this.token = this.visible = this.sawChoices = this.usage = false;
    this.choiceCount = this.members = 0;
    this.valueStart = this.finishStart = this.modelStart = -1;
    this.promptTokens = this.inputTokens = this.completionTokens = this.outputTokens = -1;
    this.cachedTokens = this.cacheHitTokens = this.reasoningTokens = -1;
    this.promptN = this.promptMs = this.predictedN = this.predictedMs = this.cacheN = -1;
  }

  /** After a value at i: past a comma (more), or past `close` (no more); DEFER on anything else. */
  after(i: number, close: number): number {
    const b = this.b;
    i = this.space(i);
    this.more = b[i] === COMMA;
    if (this.more) return this.space(i + 1);
    return b[i] === close ? i + 1 : DEFER;
  }

  /** A member's key at i (a plain string, then a colon): its span kept; the index of its value, or DEFER. */
  key(i: number): number {
    const b = this.b;
    if (b[i] !== QUOTE) return DEFER;
    const end = this.stringEnd(i);
    if (end === DEFER) return DEFER;
    this.keyStart = i + 1;
    this.keyEnd = end - 1;
    i = this.space(end);
    if (b[i] !== COLON) return DEFER;
    return this.space(i + 1);
  }

  /** The key read last is `key`, or one of `keys`. */
  keyIs(key: Uint8Array): boolean {
    // The length first, here: most keys differ in it, and the walk compares each key with up
    // to eight names, so a call per name would cost more than the compare.
    return this.keyEnd - this.keyStart === key.length && sameBytes(this.b, this.keyStart, key);
  }
  keyIn(keys: readonly Uint8Array[]): boolean {
    return keyIn(this.b, this.keyStart, this.keyEnd, keys);
  }

  // White space and a primitive's end crossed here, not by a call of bytes.ts's skipSpace and
  // values.ts's skipValue: each call of those cost a token chunk's full walk 5 to 10 % more CPU
  // (node bench/skim.ts).
  space(i: number): number {
    const b = this.b;
    const end = this.end;
    while (i < end) {
      const c = b[i];
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
      i++;
    }
    return i;
  }

  /** Index just past the string that opens at i, or DEFER. */
  stringEnd(i: number): number {
    const q = stringEnd(this.b, i + 1, this.end, false);
    return q < 0 ? DEFER : q + 1;
  }

  /** Index just past the value that starts at i, or DEFER. */
  skip(i: number): number {
    const b = this.b;
    const c = b[i];
    if (c === QUOTE) return this.stringEnd(i);
    if (c === 0x7b || c === 0x5b) return skipValue(b, i, this.end);
    const j = primitiveEnd(b, i, this.end);
    return j === i ? DEFER : j;
  }

  /** What the walk read, as classifyEvent would report it: a boolean when only the token. */
  facts(token: boolean): boolean | EventFacts {
    const b = this.b as Buffer;
    let finishReason: string | undefined;
    if (this.finishStart !== -1) finishReason = b.toString('latin1', this.finishStart, Math.min(this.finishEnd, this.finishStart + MAX_FINISH_REASON));
    const usage = this.usage ? this.usageFacts() : undefined;
    const timed = this.promptN !== -1 && this.promptMs !== -1 && this.predictedN !== -1 && this.predictedMs !== -1;
    const reasoning = token && !this.visible;
    if (usage === undefined && finishReason === undefined && !timed) return reasoning ? REASONING : token;
    let facts: EventFacts = reasoning
      ? { token, usage, error: false, done: false, malformed: false, finishReason, reasoning: true }
      : { token, usage, error: false, done: false, malformed: false, finishReason };
    if (timed) {
      const timings = { promptTokens: this.promptN, promptMs: this.promptMs, predictedTokens: this.predictedN, predictedMs: this.predictedMs };
      facts = { ...facts, timings: this.cacheN === -1 ? timings : { ...timings, cachedTokens: this.cacheN } };
    }
    return this.modelStart !== -1 && this.modelEnd > this.modelStart ? { ...facts, model: b.toString('utf8', this.modelStart, this.modelEnd) } : facts;
  }

  private usageFacts(): EventFacts['usage'] {
    const prompt = this.promptTokens !== -1 ? this.promptTokens : this.inputTokens;
    const completion = this.completionTokens !== -1 ? this.completionTokens : this.outputTokens;
    const cached = this.cachedTokens !== -1 ? this.cachedTokens : this.cacheHitTokens;
    const reasoning = this.reasoningTokens;
    if (cached !== -1 || reasoning !== -1)
      return {
        promptTokens: prompt === -1 ? undefined : prompt,
        completionTokens: completion === -1 ? undefined : completion,
        cacheReadTokens: undefined,
        cacheCreationTokens: undefined,
        cachedTokens: cached === -1 ? undefined : cached,
        reasoningTokens: reasoning === -1 ? undefined : reasoning,
      };
    if (prompt !== -1 || completion !== -1)
      return { promptTokens: prompt === -1 ? undefined : prompt, completionTokens: completion === -1 ? undefined : completion };
    return undefined;
  }
}
