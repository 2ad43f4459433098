import { createServer, connect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

/**
 * A TCP proxy in front of a server (the test database), for cutting the line: `cut()` destroys
 * every open connection and refuses new ones until `restore()`. Refused connections are accepted
 * and destroyed at once, as a dead host behind a load balancer looks to the driver.
 *
 * @example
 * const proxy = await startTcpProxy(new URL(uri).host);
 * const env = { MONGODB_URI: proxy.uri(uri) };
 * proxy.cut(); ...; proxy.restore();
 */
export interface TcpProxy {
  port: number;
  /** `uri` with its host replaced by the proxy's. */
  uri(uri: string): string;
  /** Destroy every open connection and refuse new ones. */
  cut(): void;
  /** Accept and forward connections again. */
  restore(): void;
  readonly isCut: boolean;
  /** Connections refused while cut (a sign the client tried to reconnect). */
  readonly refused: number;
  /** Connections accepted and forwarded. */
  readonly accepted: number;
  close(): Promise<void>;
}

export async function startTcpProxy(target: string): Promise<TcpProxy> {
  const [host, port] = splitHost(target);
  const open = new Set<Socket>();
  let isCut = false;
  let refused = 0;
  let accepted = 0;
  const server: Server = createServer((client) => {
    if (isCut) {
      refused++;
      client.destroy();
      return;
    }
    accepted++;
    const upstream = connect(port, host);
    open.add(client).add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((res, rej) => {
    server.once('error', rej);
    server.listen(0, '127.0.0.1', () => res());
  });
  const own = (server.address() as AddressInfo).port;
  return {
    port: own,
    uri(u) {
      const url = new URL(u);
      url.host = `127.0.0.1:${own}`;
      return url.toString();
    },
    cut() {
      isCut = true;
      for (const s of open) s.destroy();
      open.clear();
    },
    restore() {
      isCut = false;
    },
    get isCut() {
      return isCut;
    },
    get refused() {
      return refused;
    },
    get accepted() {
      return accepted;
    },
    close() {
      for (const s of open) s.destroy();
      return new Promise((res) => server.close(() => res()));
    },
  };
}

function splitHost(target: string): [string, number] {
  const i = target.lastIndexOf(':');
  return [target.slice(0, i), Number(target.slice(i + 1))];
}
