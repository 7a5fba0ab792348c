// IP addresses: lists of trusted addresses and networks, and the client address behind trusted reverse proxies.
import { BlockList, isIP } from 'node:net';

/** Peer addresses arrive as IPv4-mapped IPv6 (::ffff:127.0.0.1) on dual-stack sockets; compare them as IPv4. */
export function normalizeIp(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1]!;
  return address.toLowerCase();
}

/** "10.0.0.0/8" or "::1" as a network, or null when it is neither an address nor a CIDR. */
export function parseNetwork(text: string): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } | null {
  const [raw, bits, extra] = text.split('/');
  if (raw === undefined || extra !== undefined) return null;
  const address = normalizeIp(raw);
  const version = isIP(address);
  if (version === 0) return null;
  const max = version === 4 ? 32 : 128;
  const prefix = bits === undefined ? max : /^\d{1,3}$/.test(bits) ? Number(bits) : NaN;
  if (!(prefix >= 0 && prefix <= max)) return null;
  return { address, prefix, family: version === 4 ? 'ipv4' : 'ipv6' };
}

/** How many answers a matcher remembers before it starts over (a peer's address repeats on every request). */
const MATCHER_MEMORY = 4096;

/** The matcher made for each list: the config's one list of trusted proxies gets one matcher, and one memory. */
const matchers = new WeakMap<readonly string[], (address: string) => boolean>();

/** A test for "is this peer one of these addresses or networks"; entries must have passed parseNetwork. */
export function addressMatcher(entries: readonly string[]): (address: string) => boolean {
  let matcher = matchers.get(entries);
  if (matcher === undefined) {
    matcher = newMatcher(entries);
    matchers.set(entries, matcher);
  }
  return matcher;
}

function newMatcher(entries: readonly string[]): (address: string) => boolean {
  const list = new BlockList();
  let networks = 0;
  for (const entry of entries) {
    const n = parseNetwork(entry);
    if (n) {
      list.addSubnet(n.address, n.prefix, n.family);
      networks++;
    }
  }
  if (networks === 0) return () => false;
  // BlockList.check builds a SocketAddress each time; the answer for an address never changes, so it is kept.
  const known = new Map<string, boolean>();
  return (address) => {
    let answer = known.get(address);
    if (answer === undefined) {
      const a = normalizeIp(address);
      const family = isIP(a);
      answer = family !== 0 && list.check(a, family === 6 ? 'ipv6' : 'ipv4');
      if (known.size >= MATCHER_MEMORY) known.clear();
      known.set(address, answer);
    }
    return answer;
  };
}

/**
 * The client's address. From a peer that is a trusted proxy, the right-most X-Forwarded-For entry that is not
 * itself a trusted proxy (entries further left are whatever the client claimed); from anyone else, the peer.
 * An entry that is not an address stops the walk at the proxy that added it.
 */
export function clientAddress(peer: string, forwardedFor: string | null, trusted: (address: string) => boolean): string {
  let client = normalizeIp(peer);
  if (forwardedFor === null || !trusted(client)) return client;
  const hops = forwardedFor
    .split(',')
    .map((h) => h.trim())
    .filter((h) => h !== '');
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = normalizeIp(hops[i]!);
    if (isIP(hop) === 0) return client;
    client = hop;
    if (!trusted(hop)) return client;
  }
  return client;
}

/**
 * The address a per-address limit counts (connection share, sign-in throttle, client registrations, metadata
 * fetches): an IPv4 address as it is, an IPv6 address by its /64 prefix, written `2001:db8:0:1::/64`. One IPv6 host
 * holds a whole /64, so counting its single addresses would give it 2^64 shares.
 */
export function limitAddress(address: string): string {
  const a = normalizeIp(address);
  if (isIP(a) !== 6) return a;
  const groups = ipv6Groups(a);
  if (groups === null) return a;
  // An IPv4-mapped address in any spelling (::ffff:102:304, 0:0:0:0:0:ffff:1.2.3.4) is that IPv4 address.
  if (groups.slice(0, 5).every((g) => g === '0') && groups[5] === 'ffff') {
    const [hi, lo] = [Number.parseInt(groups[6]!, 16), Number.parseInt(groups[7]!, 16)];
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  return `${groups.slice(0, 4).join(':')}::/64`;
}

/** The eight groups of an IPv6 address, in lower-case hex without leading zeros; null when it is not one. */
function ipv6Groups(address: string): string[] | null {
  let text = address.split('%')[0]!;
  // A dotted IPv4 tail (::ffff:0:1.2.3.4, 64:ff9b::1.2.3.4) is the last two groups.
  const tail = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (tail) {
    const [a, b, c, d] = tail.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, tail.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const split = (half: string) => (half === '' ? [] : half.split(':'));
  const head = split(halves[0]!);
  const rest = halves.length === 2 ? split(halves[1]!) : [];
  const zeros = 8 - head.length - rest.length;
  if (halves.length === 2 ? zeros < 1 : zeros !== 0) return null;
  const groups = [...head, ...Array<string>(halves.length === 2 ? zeros : 0).fill('0'), ...rest];
  if (!groups.every((g) => /^[0-9a-f]{1,4}$/i.test(g))) return null;
  return groups.map((g) => Number.parseInt(g, 16).toString(16));
}

// Loopback hosts, as a URL's hostname spells them (IPv4 normalized, IPv6 in brackets). Two uses need two rules:
// where svc itself connects, any address of 127.0.0.0/8 is this machine; where svc sends a browser back to a native
// app, only the hosts RFC 8252 §7.3 names (and localhost, which clients still register) are accepted, and
// widening that list would let more redirect URIs through than before.

/** A host svc connects to over plain http, such as an identity provider's issuer in tests and local development. */
export function isLoopbackIssuerHost(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(hostname);
}

const LOOPBACK_REDIRECT_HOSTS: ReadonlySet<string> = new Set(['127.0.0.1', '[::1]', 'localhost']);

/** A redirect URI's host on which plain http is allowed and any port matches (RFC 8252 §7.3). */
export function isLoopbackRedirectHost(hostname: string): boolean {
  return LOOPBACK_REDIRECT_HOSTS.has(hostname);
}

/**
 * Where an IP address leads, for the rule on where svc may send requests an upstream asked for: `public` is the
 * internet; the others are this machine (`loopback`), a private network (RFC 1918, fc00::/7, 100.64.0.0/10 of
 * carrier-grade NAT), the link (`link-local`, 169.254.0.0/16 with cloud metadata services, fe80::/10), "no address"
 * (`unspecified`, 0.0.0.0/8 and ::, which reach this machine), or a block that is not routed on the internet
 * (`reserved`: documentation, benchmarking, multicast, the future-use block, and IPv6 outside 2000::/3). An
 * IPv4-mapped or NAT64 (64:ff9b::/96) or 6to4 (2002::/16) address is judged by the IPv4 address in it; anything
 * that is not an address is `reserved`.
 */
export type AddressScope = 'public' | 'loopback' | 'private' | 'link-local' | 'unspecified' | 'reserved';

const SCOPE_NETWORKS: readonly (readonly [Exclude<AddressScope, 'public'>, readonly string[]])[] = [
  ['unspecified', ['0.0.0.0/8', '::/128']],
  ['loopback', ['127.0.0.0/8', '::1/128']],
  ['private', ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10', 'fc00::/7']],
  ['link-local', ['169.254.0.0/16', 'fe80::/10']],
  [
    'reserved',
    [
      '192.0.0.0/24',
      '192.0.2.0/24',
      '192.88.99.0/24',
      '198.18.0.0/15',
      '198.51.100.0/24',
      '203.0.113.0/24',
      '224.0.0.0/4',
      '240.0.0.0/4',
      '2001:2::/48',
      '2001:10::/28',
      '2001:db8::/32',
      '3fff::/20',
    ],
  ],
];
let scopeLists: readonly (readonly [Exclude<AddressScope, 'public'>, BlockList])[] | null = null;
let globalUnicast: BlockList | null = null;

export function addressScope(address: string): AddressScope {
  let a = normalizeIp(address).split('%')[0]!;
  let family = isIP(a);
  if (family === 6) {
    const embedded = embeddedIpv4(a);
    if (embedded !== null) [a, family] = [embedded, 4];
  }
  if (family === 0) return 'reserved';
  const type = family === 6 ? 'ipv6' : 'ipv4';
  scopeLists ??= SCOPE_NETWORKS.map(([scope, networks]) => {
    const list = new BlockList();
    for (const n of networks) {
      const { address: base, prefix, family: f } = parseNetwork(n)!;
      list.addSubnet(base, prefix, f);
    }
    return [scope, list] as const;
  });
  for (const [scope, list] of scopeLists) if (list.check(a, type)) return scope;
  if (type === 'ipv4') return 'public';
  if (globalUnicast === null) {
    globalUnicast = new BlockList();
    globalUnicast.addSubnet('2000::', 3, 'ipv6');
  }
  return globalUnicast.check(a, 'ipv6') ? 'public' : 'reserved';
}

/** The IPv4 address an IPv4-mapped (::ffff:0:0/96), NAT64 (64:ff9b::/96) or 6to4 (2002::/16) address stands for. */
function embeddedIpv4(address: string): string | null {
  const g = ipv6Groups(address);
  if (g === null) return null;
  const dotted = (hi: string, lo: string) => {
    const [h, l] = [Number.parseInt(hi, 16), Number.parseInt(lo, 16)];
    return `${h >> 8}.${h & 255}.${l >> 8}.${l & 255}`;
  };
  if (g.slice(0, 5).every((x) => x === '0') && g[5] === 'ffff') return dotted(g[6]!, g[7]!);
  if (g[0] === '64' && g[1] === 'ff9b' && g.slice(2, 6).every((x) => x === '0')) return dotted(g[6]!, g[7]!);
  if (g[0] === '2002') return dotted(g[1]!, g[2]!);
  return null;
}
