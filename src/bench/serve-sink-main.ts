import { connect, type Socket } from 'node:net';

/**
 * Child-process reader of the serve bench's socket floor: opens
 * `connections` TCP connections to 127.0.0.1:`port` (the arguments), reads
 * and discards what arrives, and exits once the server has closed them all,
 * printing the bytes it read. A process of its own, as autocannon is, so
 * the reading side's CPU time is not the server's.
 */
const [port, connections] = process.argv.slice(2).map(Number);
let open = connections;
let bytes = 0;
const sockets: Socket[] = [];
for (let i = 0; i < connections; i++) {
  const socket = connect(port, '127.0.0.1');
  socket.on('data', (chunk: Buffer) => (bytes += chunk.length));
  socket.on('error', (error) => {
    process.stderr.write(`${error.message}\n`);
    process.exitCode = 1;
  });
  socket.on('close', () => {
    if (--open === 0) process.stdout.write(`${bytes}\n`);
  });
  sockets.push(socket);
}
