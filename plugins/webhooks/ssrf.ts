/**
 * Where outbound webhooks may connect to: globally routable unicast addresses only, unless the
 * URL's host is in `WEBHOOK_ENDPOINTS_ALLOWED_HOSTS`. Addresses are classified with ipaddr.js's
 * table of special ranges (IANA's special-purpose registries), plus the few it calls unicast that
 * are not (`NOT_GLOBAL_V6`); an IPv6 address carrying an IPv4 address (mapped, compatible,
 * translated, NAT64, 6to4, Teredo) is judged by that IPv4 address. The check runs when the URL is
 * saved and again before every delivery, and the connection goes to the checked addresses only
 * (so a name that resolves elsewhere between the check and the connect, DNS rebinding, gains
 * nothing). Redirects are never followed, so no other address is ever reached.
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';

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

/** The setting a refusal points to. */
export const ALLOWED_HOSTS_SETTING = 'WEBHOOK_ENDPOINTS_ALLOWED_HOSTS';

/** The classes of ipaddr.js's range table (`range()`), as a refusal names them. */
const CLASS_NAMES: Record<string, string> = {
  unspecified: 'an unspecified address',
  broadcast: 'a broadcast address',
  multicast: 'a multicast address',
  linkLocal: 'a link-local address',
  loopback: 'a loopback address',
  carrierGradeNat: 'a carrier-grade NAT address',
  private: 'a private address',
  uniqueLocal: 'a unique-local address',
  deprecatedSiteLocal: 'a site-local address',
  discard: 'a discard-only address',
  benchmarking: 'a benchmarking address',
  amt: 'an AMT relay address',
  as112: 'an AS112 DNS sink address',
  as112v6: 'an AS112 DNS sink address',
  deprecatedOrchid: 'an ORCHID identifier (not routable)',
  orchid2: 'an ORCHID identifier (not routable)',
  droneRemoteIdProtocolEntityTags: 'a drone remote ID tag (not routable)',
  segmentRouting: 'a segment routing address',
};
const RESERVED = {
  ipv4: 'a reserved address (documentation, benchmarking, future use)',
  ipv6: 'a reserved address (documentation, protocol assignments)',
};

/** Named before their range: cloud providers' instance metadata services. */
const CLOUD_METADATA = new Set(['169.254.169.254', 'fd00:ec2::254']);

/**
 * What ipaddr.js 2.5 leaves as `unicast` but is not globally routable. Its IPv4 table covers the
 * whole IANA special-purpose registry (0/8, 100.64/10, 192.0.0/24, 192.0.2/24, 198.18/15,
 * 198.51.100/24, 203.0.113/24, 240/4 and the rest: the tests check each). Its IPv6 table names the
 * special ranges but calls every other address unicast, so IPv4-compatible addresses (::/96) and
 * the unallocated space outside 2000::/3 (the only global unicast block) need these two rules.
 */
const NOT_GLOBAL_V6 = {
  ipv4Compatible: ipaddr.IPv6.parseCIDR('::/96'),
  globalUnicast: ipaddr.IPv6.parseCIDR('2000::/3'),
};

/** RFC 6052: the bytes of the IPv4 address in a NAT64 address, by the length of its prefix (byte 8 is always skipped). */
const NAT64_V4_BYTES: Record<number, number[]> = { 48: [6, 7, 9, 10], 56: [7, 9, 10, 11], 64: [9, 10, 11, 12], 96: [12, 13, 14, 15] };
const WELL_KNOWN_NAT64 = ipaddr.IPv6.parseCIDR('64:ff9b::/96');

const v4 = (bytes: number[]): ipaddr.IPv4 => new ipaddr.IPv4(bytes);

/**
 * The IPv4 addresses an IPv6 address carries, with the name of its form; null when it carries
 * none. A local-use NAT64 address (64:ff9b:1::/48) gives one reading per prefix length its
 * operator may have chosen: the address is judged by all of them.
 */
function embedded(ip: ipaddr.IPv6, range: string): { form: string; ip: ipaddr.IPv4 }[] | null {
  const b = ip.toByteArray();
  const last32 = (form: string) => [{ form, ip: v4(b.slice(12)) }];
  switch (range) {
    case 'ipv4Mapped': return last32('an IPv4-mapped address');
    case 'rfc6145': return last32('an IPv4-translated address');
    case '6to4': return [{ form: 'a 6to4 address', ip: v4(b.slice(2, 6)) }];
    case 'teredo': return [{ form: 'a Teredo address', ip: v4(b.slice(12).map((x) => x ^ 0xff)) }];
    case 'rfc6052':
      if (ip.match(WELL_KNOWN_NAT64)) return last32('a NAT64 address');
      return Object.entries(NAT64_V4_BYTES).map(([len, at]) => ({ form: `a local-use NAT64 address (read with a /${len} prefix)`, ip: v4(at.map((i) => b[i]!)) }));
    case 'unicast': return ip.match(NOT_GLOBAL_V6.ipv4Compatible) ? last32('an IPv4-compatible address') : null;
    default: return null;
  }
}

function refusedV4(ip: ipaddr.IPv4): string | null {
  if (CLOUD_METADATA.has(ip.toString())) return 'a cloud metadata address';
  const range = ip.range() as string;
  if (range === 'unicast') return null;
  return range === 'reserved' ? RESERVED.ipv4 : CLASS_NAMES[range] ?? `a special-purpose address (${range})`;
}

function refusedV6(ip: ipaddr.IPv6): string | null {
  if (CLOUD_METADATA.has(ip.toString())) return 'a cloud metadata address';
  const range = ip.range() as string;
  const readings = embedded(ip, range);
  if (readings) {
    for (const r of readings) {
      const why = refusedV4(r.ip);
      if (why) return `${r.form} of ${r.ip.toString()}, ${why}`;
    }
    return null;
  }
  if (range === 'unicast') return ip.match(NOT_GLOBAL_V6.globalUnicast) ? null : 'an address outside the global unicast range 2000::/3';
  return range === 'reserved' ? RESERVED.ipv6 : CLASS_NAMES[range] ?? `a special-purpose address (${range})`;
}

/**
 * Why `address` may not be connected to, or null when it is a globally routable unicast address.
 * An IPv6 address carrying an IPv4 address is judged by it (`a NAT64 address of 169.254.169.254,
 * a cloud metadata address`).
 */
export function refusedAs(address: string): string | null {
  const family = isIP(address.split('%')[0]!);
  if (!family) return 'not an IP address';
  const ip = ipaddr.parse(address);
  return ip.kind() === 'ipv4' ? refusedV4(ip as ipaddr.IPv4) : refusedV6(ip as ipaddr.IPv6);
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
    if (!why) continue;
    const what = literal ? `${host} is ${why}` : `host ${host} resolves to ${a.address}, ${why}`;
    throw new UnsafeUrlError(`${what}; to allow it, add the host to ${ALLOWED_HOSTS_SETTING}`);
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
