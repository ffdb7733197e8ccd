// With INFERMETER_WORKERS > 1 the data plane runs in worker processes and the measurement in
// the primary: each worker sends its requests' events (started, first output, inter-token gaps,
// finished samples), its proxy events and its usage records to the primary in batches, where the
// one recorder, the dialects and the ledger turn them into metrics and records. So /metrics,
// /metrics-json and the AOM periods are those of all workers' traffic, exactly, and nothing has
// to be merged after the fact. The messages are the calls themselves: a call's kind is its
// place in CALLS, its arguments follow (a request's info as its fields, no object to clone).
import type { Ledger } from '../ledger/ledger.ts';
import type { MeasurementSink } from '../measure/request-timer.ts';
import type { InferenceApi, RequestInfo } from '../measure/sample.ts';
import { infoOf, trackInFlight } from './in-flight.ts';
import type { LoopDelayReading } from '../metrics/own/loop-delay.ts';
import type { ProcessReading } from '../metrics/own/process-families.ts';
import type { HeldBodyBytes, ProxyEvents } from '../metrics/own/proxy-families.ts';

/** Everything a worker reports, each method required (an optional one is called where the primary has it). */
type Reports = Required<MeasurementSink> & { readonly [K in keyof ProxyEvents]-?: NonNullable<ProxyEvents[K]> } & Pick<Ledger, 'append'>;

/** `names` when they are every method of T: one left out is a type error that names it. */
const everyMethodOf =
  <T>() =>
  <const N extends readonly (keyof T)[]>(
    names: N & ([Exclude<keyof T, N[number]>] extends [never] ? unknown : { readonly unlisted: Exclude<keyof T, N[number]> }),
  ): N =>
    names;

const SINK_CALLS = everyMethodOf<MeasurementSink>()(['started', 'firstOutput', 'interToken', 'finished', 'firstVisibleOutput']);
const EVENT_CALLS = everyMethodOf<ProxyEvents>()([
  'uninspected',
  'tapProblem',
  'proxyError',
  'retried',
  'injectionActive',
  'usageInjected',
  'usageStripped',
  'accessLogDropped',
  'rejected',
  'clientError',
  'bodyUnheld',
  'httpRequest',
]);
const LEDGER_CALLS = ['append'] as const satisfies readonly (keyof Ledger)[];
/** What crosses the bus, in order: a call's index is its kind. A new method is one name in its interface's list. */
const CALLS = [...SINK_CALLS, ...EVENT_CALLS, ...LEDGER_CALLS] as const;
type Call = (typeof CALLS)[number];

/** The calls whose first argument is a request's info, sent as its fields. */
type InfoCall = { [K in Call]: RequestInfo extends Parameters<Reports[K]>[0] ? K : never }[Call];
/**
 * Whether an info call's request id crosses too: at first output and first visible output, the
 * exemplar of their figure; not at the start nor with each token, where nobody reads it and it
 * would be bytes on every token. A new info call is a type error until it is here.
 */
const CARRIES_ID: { readonly [K in InfoCall]: boolean } = { started: false, firstOutput: true, interToken: false, firstVisibleOutput: true };

type InfoFields = [api: InferenceApi, model: string, stream: boolean, tenant: string | undefined, accepted: boolean | undefined, requestId: string | undefined];
type AfterFirst<P> = P extends readonly [unknown, ...infer R] ? R : never;
type Message<K extends Call> = K extends InfoCall
  ? [kind: number, ...InfoFields, ...AfterFirst<Parameters<Reports[K]>>]
  : [kind: number, ...Parameters<Reports[K]>];
/** One call, as compact as structured clone makes cheap: its kind, then its arguments ("none" stays undefined). */
type BusEvent = { [K in Call]: Message<K> }[Call];
/** Where an info call's arguments after the info start in its message. */
const INFO_END = 7;

/** Worker -> primary. */
export type WorkerMessage =
  | { readonly t: 'events'; readonly events: BusEvent[]; readonly connections: number }
  | { readonly t: 'flushed'; readonly seq: number; readonly loopDelay?: LoopDelayReading; readonly held?: HeldBodyBytes; readonly process?: ProcessReading }
  | { readonly t: 'listening'; readonly url: string };

/** Primary -> worker. */
export type PrimaryMessage =
  | { readonly t: 'flush'; readonly seq: number }
  | { readonly t: 'drain'; readonly timeoutMs: number }
  // SIGHUP reached the primary: read INFERMETER_TENANT_ALIASES again.
  | { readonly t: 'reloadTenants' }
  // SIGHUP reached the primary: read INFERMETER_PRICES_FILE again (the usage records' cost).
  | { readonly t: 'reloadPrices' }
  // SIGHUP reached the primary: open INFERMETER_ACCESS_LOG's file again at its path.
  | { readonly t: 'reopenAccessLog' };

export interface WorkerBus {
  readonly sink: MeasurementSink;
  readonly events: ProxyEvents;
  /** The usage records' lines, for the primary's spool. */
  readonly ledger: Pick<Ledger, 'append'>;
  /** Sends what is batched now. */
  flush(): void;
}

type AnyCall = (...args: never[]) => void;

/** Worker side: batches calls and sends them every `intervalMs`, or sooner when many wait. */
export function createWorkerBus(send: (m: WorkerMessage) => void, connections: () => number, intervalMs = 50, maxBatch = 512): WorkerBus {
  let batch: BusEvent[] = [];
  let timer: NodeJS.Timeout | undefined;
  const flush = (): void => {
    if (timer !== undefined) {
      clearTimeout(timer);
      timer = undefined;
    }
    if (batch.length === 0) return;
    const events = batch;
    batch = [];
    send({ t: 'events', events, connections: connections() });
  };
  const push = (e: unknown[]): void => {
    batch.push(e as BusEvent);
    if (batch.length >= maxBatch) flush();
    else if (timer === undefined) {
      timer = setTimeout(flush, intervalMs);
      timer.unref();
    }
  };
  // One plain function per call, made here once.
  const encoder = (name: Call): AnyCall => {
    const kind = CALLS.indexOf(name);
    if (!(name in CARRIES_ID)) return (...args: unknown[]) => push(plainMessage(kind, args));
    const id = CARRIES_ID[name as InfoCall];
    return (i: RequestInfo, ...rest: unknown[]) => push(infoMessage(kind, i, id ? i.requestId : undefined, rest));
  };
  const encoders = <N extends Call>(names: readonly N[]) => Object.fromEntries(names.map((name) => [name, encoder(name)])) as unknown as Pick<Reports, N>;
  return { flush, sink: encoders(SINK_CALLS), events: encoders(EVENT_CALLS), ledger: encoders(LEDGER_CALLS) };
}

export interface WorkerReceiver {
  receive(batch: readonly BusEvent[]): void;
  /** The worker is gone: finish what it had in flight as failed; returns how many. */
  lost(): number;
  /** Entries of the in-flight table (tests: bounded by the label cap, never by the names sent). */
  readonly tracked: number;
}

/**
 * Primary side: calls each of one worker's calls on the real sink, proxy families and ledger,
 * the sink's through a tracker of that worker's requests in flight (trackInFlight).
 */
export function createWorkerReceiver(
  sink: MeasurementSink,
  events: ProxyEvents,
  label: (model: string) => string,
  tenantLabel: (tenant: string, accepted?: boolean) => string = (t) => t,
  append?: (line: string) => void,
): WorkerReceiver {
  const inFlight = trackInFlight(sink, label, tenantLabel);
  const owners: Record<string, object> = {};
  for (const name of SINK_CALLS) owners[name] = inFlight.sink;
  for (const name of EVENT_CALLS) owners[name] = events;
  for (const name of LEDGER_CALLS) owners[name] = { append };
  // A call's decoder, made once: its arguments from the message, on the method its owner has
  // now (an optional one may be absent).
  const decoders = CALLS.map((name) => {
    const owner = owners[name] as Record<string, ((...args: unknown[]) => void) | undefined>;
    if (!(name in CARRIES_ID)) return (e: readonly unknown[]) => callPlain(owner, owner[name], e);
    return (e: readonly unknown[]) => callWithInfo(owner, owner[name], e as unknown as readonly [number, ...InfoFields, ...unknown[]]);
  });
  return {
    get tracked() {
      return inFlight.tracked;
    },
    receive(batch) {
      for (const e of batch) decoders[e[0]]?.(e);
    },
    lost: inFlight.lost,
  };
}

// The four helpers below write messages and calls out by length, for the short argument lists
// the calls have: a spread or a slice of the arguments cost up to several times as much per call
// (measured, node 24).

/** A plain call's message: its kind, then its arguments. */
function plainMessage(kind: number, a: readonly unknown[]): unknown[] {
  switch (a.length) {
    case 0:
      return [kind];
    case 1:
      return [kind, a[0]];
    case 2:
      return [kind, a[0], a[1]];
    case 3:
      return [kind, a[0], a[1], a[2]];
    case 4:
      return [kind, a[0], a[1], a[2], a[3]];
    case 5:
      return [kind, a[0], a[1], a[2], a[3], a[4]];
    default:
      return [kind, ...a];
  }
}

/** An info call's message: its kind, the info's fields, then the arguments after the info. */
function infoMessage(kind: number, i: RequestInfo, requestId: string | undefined, a: readonly unknown[]): unknown[] {
  switch (a.length) {
    case 0:
      return [kind, i.api, i.model, i.stream, i.tenant, i.accepted, requestId];
    case 1:
      return [kind, i.api, i.model, i.stream, i.tenant, i.accepted, requestId, a[0]];
    case 2:
      return [kind, i.api, i.model, i.stream, i.tenant, i.accepted, requestId, a[0], a[1]];
    default:
      return [kind, i.api, i.model, i.stream, i.tenant, i.accepted, requestId, ...a];
  }
}

type Method = ((...args: unknown[]) => void) | undefined;

/** A plain call made from its message (`fn` absent: an optional method the owner lacks). */
function callPlain(owner: object, fn: Method, e: readonly unknown[]): unknown {
  if (fn === undefined) return;
  switch (e.length) {
    case 1:
      return fn.call(owner);
    case 2:
      return fn.call(owner, e[1]);
    case 3:
      return fn.call(owner, e[1], e[2]);
    case 4:
      return fn.call(owner, e[1], e[2], e[3]);
    case 5:
      return fn.call(owner, e[1], e[2], e[3], e[4]);
    case 6:
      return fn.call(owner, e[1], e[2], e[3], e[4], e[5]);
    default:
      return fn.apply(owner, e.slice(1));
  }
}

/** An info call made from its message: the info rebuilt from its fields, then the other arguments. */
function callWithInfo(owner: object, fn: Method, e: readonly [number, ...InfoFields, ...unknown[]]): unknown {
  if (fn === undefined) return;
  const info = infoOf(e[1], e[2], e[3], e[4], e[5], e[6]);
  switch (e.length) {
    case INFO_END:
      return fn.call(owner, info);
    case INFO_END + 1:
      return fn.call(owner, info, e[7]);
    case INFO_END + 2:
      return fn.call(owner, info, e[7], e[8]);
    default:
      return fn.apply(owner, [info, ...e.slice(INFO_END)]);
  }
}
