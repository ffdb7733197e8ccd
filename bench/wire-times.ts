// Socket-level truth from a tcpdump capture (pcap, loopback, IPv4): for each HTTP/1.1 exchange
// on a proxy's client-facing port, when its request's first byte, its response's first byte
// (the head), its first body byte and its last byte crossed that port. Exchanges on one
// keep-alive connection follow each other: a client segment after response bytes starts the
// next. Each is named by the request's X-Request-Id.

export interface WireExchange {
  readonly requestId: string | undefined;
  /** Milliseconds, on the capture's clock. */
  readonly requestAt: number;
  readonly headAt: number | undefined;
  readonly bodyAt: number | undefined;
  readonly lastAt: number | undefined;
}

interface Open {
  requestId: string | undefined;
  requestAt: number;
  requestText: string;
  headAt: number | undefined;
  bodyAt: number | undefined;
  lastAt: number | undefined;
  /** The response's bytes until the end of its head, to find where the body starts. */
  headText: string;
  headDone: boolean;
}

const ID = /\r\nx-request-id:[ \t]*([^\r\n]+)/i;

/** Reads a pcap file's bytes (microsecond or nanosecond timestamps; Ethernet or raw IP framing). */
export function wireExchanges(pcap: Buffer, port: number): WireExchange[] {
  const magic = pcap.readUInt32LE(0);
  const nano = magic === 0xa1b23c4d;
  if (!nano && magic !== 0xa1b2c3d4) throw new Error(`not a little-endian pcap file (magic ${magic.toString(16)})`);
  const linkType = pcap.readUInt32LE(20);
  const linkHeader = linkType === 1 ? 14 : linkType === 101 ? 0 : linkType === 113 ? 16 : -1;
  if (linkHeader < 0) throw new Error(`unsupported pcap link type ${linkType}`);
  const open = new Map<number, Open>();
  const done: WireExchange[] = [];
  const close = (o: Open) => done.push({ requestId: o.requestId, requestAt: o.requestAt, headAt: o.headAt, bodyAt: o.bodyAt, lastAt: o.lastAt });
  let at = 24;
  while (at + 16 <= pcap.length) {
    const ms = pcap.readUInt32LE(at) * 1000 + pcap.readUInt32LE(at + 4) / (nano ? 1e6 : 1e3);
    const captured = pcap.readUInt32LE(at + 8);
    const frame = pcap.subarray(at + 16, at + 16 + captured);
    at += 16 + captured;
    const ip = frame.subarray(linkHeader);
    if (ip.length < 20 || ip[0]! >> 4 !== 4 || ip[9] !== 6) continue; // IPv4, TCP
    const ipHeader = (ip[0]! & 0x0f) * 4;
    const tcp = ip.subarray(ipHeader, ip.readUInt16BE(2));
    const source = tcp.readUInt16BE(0);
    const destination = tcp.readUInt16BE(2);
    const payload = tcp.subarray((tcp[12]! >> 4) * 4);
    if (payload.length === 0) continue;
    if (destination === port) {
      const client = source;
      let o = open.get(client);
      if (o !== undefined && o.headAt !== undefined) {
        close(o);
        o = undefined;
      }
      if (o === undefined) {
        o = { requestId: undefined, requestAt: ms, requestText: '', headAt: undefined, bodyAt: undefined, lastAt: undefined, headText: '', headDone: false };
        open.set(client, o);
      }
      if (o.requestId === undefined && o.requestText.length < 16384) {
        o.requestText += payload.toString('latin1');
        o.requestId = ID.exec(o.requestText)?.[1]?.trim();
      }
    } else if (source === port) {
      const o = open.get(destination);
      if (o === undefined) continue;
      o.headAt ??= ms;
      o.lastAt = ms;
      if (!o.headDone) {
        const before = o.headText.length;
        o.headText += payload.toString('latin1');
        const end = o.headText.indexOf('\r\n\r\n');
        if (end !== -1) {
          o.headDone = true;
          // Body bytes in this very segment (the head and the first chunk together)?
          if (end + 4 < o.headText.length) o.bodyAt = ms;
        } else if (before > 65536) o.headDone = true;
      } else o.bodyAt ??= ms;
    }
  }
  for (const o of open.values()) close(o);
  return done;
}
