// The NATS JetStream sink: each record published to the subject with `Nats-Msg-Id` set to its
// event id, so that the stream's duplicate window drops a re-delivery, and the batch acknowledged
// when JetStream acknowledged every one of its records. No stream bound to the subject: one is
// created (`INFERMETER_<subject>`, file storage, the subject alone, a one-hour duplicate window,
// limits retention without limits: the operator's to bound or to replace with their own).
// Every failure (no server, no stream, a timeout, a stream full) is retried; a record that is
// not JSON with an id is parked.
import type { JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Delivery } from './sink.ts';

/** How long the created stream remembers a message id: re-deliveries within it are dropped. */
const DUPLICATE_WINDOW_MS = 3_600_000;

export interface NatsSinkOptions {
  /** `host:port` */
  readonly server: string;
  readonly subject: string;
  readonly timeoutMs: number;
  readonly token?: string;
}

/** The stream infermeter creates for `subject` when none is bound to it. */
export function streamName(subject: string): string {
  return `INFERMETER_${subject.replace(/[^A-Za-z0-9_-]/g, '_')}`;
}

export function natsDelivery(options: NatsSinkOptions): Delivery {
  let nc: NatsConnection | undefined;
  let js: JetStreamClient | undefined;
  let closed = false;

  /** The connection (made again after one that closed) and the stream, made sure of once per connection. */
  const client = async (): Promise<JetStreamClient> => {
    if (nc !== undefined && !nc.isClosed() && js !== undefined) return js;
    // Loaded here, not with the module: the client is 64 modules that an infermeter without this
    // sink would load on every start for nothing.
    const [{ connect, nanos }, { jetstream, jetstreamManager }] = await Promise.all([import('@nats-io/transport-node'), import('@nats-io/jetstream')]);
    const conn = await connect({
      servers: options.server,
      timeout: options.timeoutMs,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 500,
      name: 'infermeter-usage',
      ...(options.token === undefined ? {} : { token: options.token }),
    });
    try {
      const jsm = await jetstreamManager(conn, { timeout: options.timeoutMs });
      try {
        await jsm.streams.find(options.subject);
      } catch {
        await jsm.streams.add({ name: streamName(options.subject), subjects: [options.subject], duplicate_window: nanos(DUPLICATE_WINDOW_MS) });
      }
    } catch (error) {
      await conn.close().catch(() => undefined);
      throw error;
    }
    if (closed) {
      await conn.close().catch(() => undefined);
      throw new Error('closing');
    }
    nc = conn;
    js = jetstream(conn, { timeout: options.timeoutMs });
    return js;
  };

  return {
    async send(lines) {
      const client_ = await client();
      const refused: number[] = [];
      const acks: Promise<unknown>[] = [];
      lines.forEach((line, i) => {
        let id: unknown;
        try {
          id = (JSON.parse(line) as { id?: unknown }).id;
        } catch {
          id = undefined;
        }
        if (typeof id !== 'string' || id === '') refused.push(i);
        else acks.push(client_.publish(options.subject, line, { msgID: id }));
      });
      // Every publish awaited before the first failure is thrown: none is left unhandled.
      const results = await Promise.allSettled(acks);
      const failure = results.find((r) => r.status === 'rejected');
      if (failure !== undefined) throw (failure as PromiseRejectedResult).reason;
      return refused;
    },
    async close() {
      closed = true;
      await nc?.close().catch(() => undefined);
    },
  };
}
