/**
 * core/db-sockets.ts: a write that waits for 'drain' on a database socket the peer closed fails
 * as a MongoNetworkError instead of waiting forever (the mongodb driver's server monitor hung that
 * way after a network cut, and the server answered 503 until a restart), and Node's own errors of
 * such a socket count as "database unavailable".
 */
import { once } from 'node:events';
import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';
import { MongoNetworkError } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { guardDatabaseSockets, isDatabaseSocketError } from '../../core/db-sockets.ts';
import { isDatabaseUnavailable } from '../../core/http/map-error.ts';

let server: Server;
let port: number;
const guard = guardDatabaseSockets();

beforeAll(async () => {
  // A peer that hangs up on every connection after a moment, as a cut TCP proxy does.
  server = createServer((s) => setTimeout(() => s.destroy(), 20));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  port = (server.address() as AddressInfo).port;
});
afterAll(() => {
  guard.release();
  server.close();
});

/** Connects, waits until Node has destroyed the socket after the peer's FIN, then writes and waits for 'drain' as the driver does. */
async function writeAfterPeerClosed(): Promise<unknown> {
  const socket: Socket = connect(port, '127.0.0.1');
  socket.on('error', () => undefined); // the driver's own listener
  await once(socket, 'end');
  await new Promise((r) => setImmediate(r));
  expect(socket.destroyed).toBe(true);
  expect(socket.write(Buffer.alloc(16))).toBe(false);
  const drained = once(socket, 'drain').then(() => 'drained', (err: unknown) => err);
  const hung = new Promise((r) => setTimeout(() => r('still waiting after 1 s'), 1000));
  return Promise.race([drained, hung]);
}

describe('database sockets', () => {
  it("without the guard, Node never ends a wait for 'drain' on a destroyed socket (the driver's hang)", async () => {
    expect(await writeAfterPeerClosed()).toBe('still waiting after 1 s');
  });

  it('with the guard, the waiting write fails as a network error, which maps to 503', async () => {
    guard.watch(port);
    const outcome = await writeAfterPeerClosed();
    expect(outcome).toBeInstanceOf(MongoNetworkError);
    expect((outcome as Error).message).toMatch(/closed while a command was being written/);
    expect(isDatabaseUnavailable(outcome)).toBe(true);
  });

  it("marks a watched socket's own errors (EPIPE after the peer closed) as the database's, and no other socket's", async () => {
    guard.watch(port);
    const watched = connect(port, '127.0.0.1');
    await once(watched, 'connect');
    const [err] = (await Promise.all([once(watched, 'error'), Promise.resolve().then(() => watched.destroy(Object.assign(new Error('This socket has been ended by the other party'), { code: 'EPIPE' })))]))[0] as [Error];
    expect(isDatabaseSocketError(err)).toBe(true);
    expect(isDatabaseUnavailable(err)).toBe(true);
    expect(isDatabaseUnavailable(Object.assign(new Error('This socket has been ended by the other party'), { code: 'EPIPE' }))).toBe(false);
  });
});
