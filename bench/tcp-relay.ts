// A raw TCP relay: each client connection gets its own upstream connection and every byte read
// on one side is written to the other, no HTTP parsed or framed. Not a proxy anyone should run
// (it meters nothing and routes nothing); the bench's measure of what Node's HTTP machinery
// costs per event over the sockets themselves (bench/cpu-split.ts). Prints its port on stdout.
import net, { type AddressInfo } from 'node:net';

const target = new URL(process.argv[2] ?? 'http://127.0.0.1:8000');
const server = net.createServer({ noDelay: true }, (client) => {
  const upstream = net.connect({ host: target.hostname, port: Number(target.port), noDelay: true });
  const pipe = (from: net.Socket, to: net.Socket): void => {
    from.on('data', (chunk: Buffer) => {
      if (!to.write(chunk)) {
        from.pause();
        to.once('drain', () => from.resume());
      }
    });
    from.on('end', () => to.end());
    from.on('error', () => to.destroy());
    from.on('close', () => to.destroy());
  };
  pipe(client, upstream);
  pipe(upstream, client);
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port })}\n`));
process.on('SIGTERM', () => process.exit(0));
