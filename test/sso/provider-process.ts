/** The test provider in a process of its own, with its clock `clockOffsetMs` off (test/sso/provider.ts). */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { configure, type Account, type ProviderOptions } from './provider.ts';

const opts = JSON.parse(process.env.OP_OPTIONS!) as ProviderOptions & { clockOffsetMs: number };
const realNow = Date.now;
Date.now = () => realNow() + opts.clockOffsetMs;
const accounts = new Map<string, Account>(opts.accounts.map((a) => [a.sub, a]));
const server = createServer();
server.listen(0, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  server.on('request', configure(issuer, opts.clients, (id) => accounts.get(id)).callback());
  process.send!({ issuer });
});
