/**
 * Keep-alive connections to receivers: one http(s) agent per origin and set of checked addresses
 * (ssrf.ts), so consecutive attempts to an endpoint reuse a connection instead of opening one each.
 * The agent of an origin is keyed by the addresses the attempt's check gave, and its connections
 * are opened through a lookup pinned to them: a connection is only ever to an address checked for
 * the attempts that use it, and when the name resolves elsewhere the next attempt gets another
 * agent (the old one's sockets close when idle). Each agent holds at most `maxSockets` connections
 * (the sender's concurrency, which no origin can exceed); an idle one is closed after `IDLE_MS`, or
 * sooner when the receiver's `Keep-Alive: timeout=` says so (node's agent honours it).
 */
import http from 'node:http';
import https from 'node:https';
import { pinnedLookup, type ResolvedAddress } from './ssrf.ts';

/** An idle connection is closed after this long (receivers often close theirs after 5 s). */
export const IDLE_MS = 4_000;
/** An agent with no attempt for this long is dropped (its connections are closed). */
const AGENT_UNUSED_MS = 60_000;

/** The agents of one sender, by origin and checked addresses. */
export class ReceiverAgents {
  private readonly agents = new Map<string, { agent: http.Agent; usedAt: number }>();
  private sweptAt = Date.now();

  constructor(private readonly maxSockets: number) {}

  /** The keep-alive agent for a request to `url` connecting to `addresses` only. */
  for(url: URL, addresses: readonly ResolvedAddress[]): http.Agent {
    const now = Date.now();
    if (now - this.sweptAt > AGENT_UNUSED_MS) this.sweep(now);
    const key = `${url.protocol}//${url.host} ${addresses.map((a) => `${a.family}/${a.address}`).sort().join(',')}`;
    let entry = this.agents.get(key);
    if (!entry) {
      const options = { keepAlive: true, maxSockets: this.maxSockets, maxFreeSockets: this.maxSockets, timeout: IDLE_MS, scheduling: 'lifo' as const, lookup: pinnedLookup([...addresses]) };
      entry = { agent: url.protocol === 'https:' ? new https.Agent(options) : new http.Agent(options), usedAt: now };
      this.agents.set(key, entry);
    }
    entry.usedAt = now;
    return entry.agent;
  }

  /** Open connections of every agent (tests). */
  get sockets(): number {
    let n = 0;
    for (const { agent } of this.agents.values()) {
      for (const list of Object.values(agent.sockets)) n += list?.length ?? 0;
      for (const list of Object.values(agent.freeSockets)) n += list?.length ?? 0;
    }
    return n;
  }

  private sweep(now: number): void {
    this.sweptAt = now;
    for (const [key, { agent, usedAt }] of this.agents) {
      if (now - usedAt <= AGENT_UNUSED_MS) continue;
      agent.destroy();
      this.agents.delete(key);
    }
  }

  /** Closes every connection (the sender stopped). */
  close(): void {
    for (const { agent } of this.agents.values()) agent.destroy();
    this.agents.clear();
  }
}
