/**
 * Where outbound webhooks may connect to. An endpoint URL is refused when its host is, or resolves
 * to, an address of the server's own networks: loopback, private, link-local, unique-local, CGNAT,
 * multicast, unspecified, or a cloud metadata address. The check runs when the URL is saved and
 * again before every delivery, and the connection goes to the checked addresses only (so a name
 * that resolves elsewhere between the check and the connect, DNS rebinding, gains nothing).
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/** One resolved address of a host, as `dns.lookup(host, {all: true})` gives it. */
export interface ResolvedAddress {
  address: string;
  family: number;
}

/** Resolves a host name to all its addresses (injectable: tests map names to chosen addresses). */
export type Resolver = (host: string) => Promise<ResolvedAddress[]>;

export const systemResolver: Resolver = (host) => dnsLookup(host, { all: true, verbatim: true });

/** A URL the network rules refuse; `message` says which address and why. */
export class UnsafeUrlError extends Error {
  override name = 'UnsafeUrlError';
}

const ranges = (list: [string, number, 'ipv4' | 'ipv6'][]): BlockList => {
  const b = new BlockList();
  for (const [net, prefix, type] of list) b.addSubnet(net, prefix, type);
  return b;
};

/** Refused address ranges by the name the error message gives them (first match wins). */
const REFUSED: [string, BlockList][] = [
  ['a cloud metadata address', (() => {
    const b = new BlockList();
    b.addAddress('169.254.169.254', 'ipv4');
    b.addAddress('fd00:ec2::254', 'ipv6');
    return b;
  })()],
  ['an unspecified address', ranges([['0.0.0.0', 8, 'ipv4'], ['::', 128, 'ipv6']])],
  ['a loopback address', ranges([['127.0.0.0', 8, 'ipv4'], ['::1', 128, 'ipv6']])],
  ['a private address', ranges([['10.0.0.0', 8, 'ipv4'], ['172.16.0.0', 12, 'ipv4'], ['192.168.0.0', 16, 'ipv4']])],
  ['a link-local address', ranges([['169.254.0.0', 16, 'ipv4'], ['fe80::', 10, 'ipv6']])],
  ['a unique-local address', ranges([['fc00::', 7, 'ipv6']])],
  ['a carrier-grade NAT address', ranges([['100.64.0.0', 10, 'ipv4']])],
  ['a multicast address', ranges([['224.0.0.0', 4, 'ipv4'], ['ff00::', 8, 'ipv6']])],
  ['a reserved or broadcast address', ranges([['240.0.0.0', 4, 'ipv4']])],
];

/** Why `address` is refused, or null when it is a public address. IPv4-mapped IPv6 counts as its IPv4. */
export function refusedAs(address: string): string | null {
  const family = isIP(address);
  if (!family) return 'not an IP address';
  const type = family === 4 ? 'ipv4' : 'ipv6';
  for (const [what, list] of REFUSED) if (list.check(address, type)) return what;
  return null;
}

/** The URL's host as written, lower case, without the brackets of an IPv6 literal. */
export const hostOf = (url: URL): string => url.hostname.toLowerCase().replace(/^\[(.*)\]$/, '$1');

export interface NetworkPolicy {
  /** Hosts (names or IPs, as written in URLs) exempt from the address rules. */
  allowedHosts: readonly string[];
  resolver: Resolver;
}

/**
 * Resolves the URL's host and checks every address it gives.
 * @returns the addresses a connection may use (all of them, checked)
 * @throws UnsafeUrlError naming the refused address, or when the host does not resolve
 */
export async function checkedAddresses(url: URL, policy: NetworkPolicy): Promise<ResolvedAddress[]> {
  const host = hostOf(url);
  const literal = isIP(host);
  let addresses: ResolvedAddress[];
  if (literal) addresses = [{ address: host, family: literal }];
  else {
    try {
      addresses = await policy.resolver(host);
    } catch (err) {
      throw new UnsafeUrlError(`host ${host} does not resolve (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
    if (!addresses.length) throw new UnsafeUrlError(`host ${host} does not resolve`);
  }
  if (policy.allowedHosts.includes(host)) return addresses;
  for (const a of addresses) {
    const why = refusedAs(a.address);
    if (why) throw new UnsafeUrlError(literal ? `${host} is ${why}` : `host ${host} resolves to ${a.address}, ${why}`);
  }
  return addresses;
}

/**
 * A `lookup` for `http.request` that answers only `addresses` (already checked): the connection
 * cannot reach anything the check did not see.
 */
export function pinnedLookup(addresses: ResolvedAddress[]): LookupFunction {
  return (_hostname, options, callback) => {
    const family = typeof options === 'object' ? options.family : undefined;
    const usable = family ? addresses.filter((a) => a.family === family) : addresses;
    const chosen = usable.length ? usable : addresses;
    if (typeof options === 'object' && options.all) (callback as (e: null, a: ResolvedAddress[]) => void)(null, chosen);
    else callback(null, chosen[0]!.address, chosen[0]!.family);
  };
}
