import { subscribe } from 'node:diagnostics_channel';
import type { Socket } from 'node:net';
import { MongoNetworkError } from 'mongodb';

/**
 * Guards the MongoDB driver's sockets against two ways a dropped connection escapes the driver's
 * error handling (mongodb 7.8 and 7.9, Node 20; seen when a network cut closes every connection):
 *
 * 1. A command written in the moment between Node destroying the socket (the peer's FIN arrived)
 *    and the socket's 'close' event: `socket.write()` returns false and emits nothing, and the
 *    driver (`Connection.writeCommand`) then waits for a 'drain' that never comes, and listens for
 *    no 'close' (the socket may even be closed already: the driver learns it one event later). The command hangs forever. When it is the server monitor's heartbeat, the monitor
 *    never checks again: the server stays Unknown and every operation fails server selection
 *    ("connection N closed") long after the database is back, until a restart. Here, when such a
 *    socket closes with a writer waiting for 'drain', it emits a MongoNetworkError: the waiting
 *    command fails as a network error, the monitor records a failed heartbeat and carries on.
 * 2. A command written after the FIN but before Node destroyed the socket fails with Node's own
 *    `Error: This socket has been ended by the other party` (code EPIPE), not a driver error.
 *    Errors of these sockets are marked, so `isDatabaseSocketError` can tell them apart (503, and
 *    the event relay's retries) from an EPIPE of any other socket.
 *
 * Which sockets: plain TCP client sockets (`net.connect`, observed through the diagnostics channel
 * `net.client.socket`) that connect to a port of a watched database host. TLS sockets are created
 * without that channel and are not covered (with a real mongod, whose monitor streams, the
 * heartbeat is rarely written in that moment).
 */
const ports = new Map<number, number>();
const MARK = Symbol('database socket error');
// From the module's load on: the driver creates its monitor's socket within createConnection(), before
// any port is watched (the port is checked when the socket connects).
subscribe('net.client.socket', (message) => arm((message as { socket: Socket }).socket));

/** Watches client sockets to the ports given to `watch` until `release` (one per database connection). */
export function guardDatabaseSockets(): { watch(port: number): void; release(): void } {
  const own = new Set<number>();
  return {
    watch(port) {
      if (!Number.isInteger(port) || own.has(port)) return;
      own.add(port);
      ports.set(port, (ports.get(port) ?? 0) + 1);
    },
    release() {
      for (const p of own) {
        const n = (ports.get(p) ?? 1) - 1;
        if (n > 0) ports.set(p, n);
        else ports.delete(p);
      }
      own.clear();
    },
  };
}

/** An error that a watched database socket raised itself (e.g. EPIPE after the peer closed). */
export function isDatabaseSocketError(err: unknown): boolean {
  return !!err && typeof err === 'object' && (err as { [MARK]?: boolean })[MARK] === true;
}

function arm(socket: Socket): void {
  socket.once('connect', () => {
    const port = socket.remotePort;
    if (port === undefined || !ports.has(port)) return;
    const address = `${socket.remoteAddress}:${port}`;
    socket.prependListener('error', (err: Error) => {
      if (err && typeof err === 'object' && !(err instanceof MongoNetworkError)) Object.defineProperty(err, MARK, { value: true });
    });
    // A write that waits for 'drain' on a destroyed socket never ends: fail it as a network error.
    const failWaitingWrite = () => {
      if (socket.listenerCount('drain') > 0 && socket.listenerCount('error') > 0) {
        socket.emit('error', new MongoNetworkError(`connection to ${address} closed while a command was being written`));
      }
    };
    // The writer may start waiting before the socket closes, or after (it was destroyed already).
    socket.prependListener('close', failWaitingWrite);
    socket.on('newListener', (event: string | symbol) => {
      if (event === 'drain' && socket.destroyed) process.nextTick(failWaitingWrite);
    });
  });
}
