import { BlockList, isIP } from 'node:net';

/**
 * Address ranges the crawler never connects to unless the host-to-address map names the
 * host: loopback, private, shared, link-local, documentation, benchmarking, multicast and
 * reserved ranges of IPv4 (RFC 6890 special-purpose registry) and their IPv6 counterparts
 * (loopback, unspecified, unique-local `fc00::/7`, link-local `fe80::/10`, multicast,
 * documentation, discard, NAT64 local-use `64:ff9b:1::/48`). An IPv4-mapped IPv6 address
 * (`::ffff:10.0.0.1`) is judged by its IPv4 part, and so is NAT64 `64:ff9b::/96`.
 * Without this a page could make the crawler fetch `http://10.0.0.1/admin` or
 * `http://localhost:6379/`: the crawler must not become a way into a private network.
 */
const blocked = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16],
  ['172.16.0.0', 12], ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.88.99.0', 24], ['192.168.0.0', 16],
  ['198.18.0.0', 15], ['198.51.100.0', 24], ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) blocked.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [
  ['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['fec0::', 10], ['ff00::', 8],
  ['2001:db8::', 32], ['100::', 64], ['64:ff9b:1::', 48], ['2001::', 23],
] as const) blocked.addSubnet(net, bits, 'ipv6');

/**
 * True when `address` (an IPv4 or IPv6 literal, brackets allowed) may be crawled: it is in
 * none of the ranges above. False for anything that is not an IP literal.
 */
export function isPublicAddress(address: string): boolean {
  const ip = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
  const family = isIP(ip);
  if (family === 4) return !blocked.check(ip, 'ipv4');
  if (family !== 6) return false;
  const lower = ip.toLowerCase();
  const mapped = /^(?:0{0,4}:){0,5}:?ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(lower) ?? /^64:ff9b::(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (mapped) return isPublicAddress(mapped[1]!);
  const hexMapped = /^(?:0{0,4}:){0,5}:?ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower);
  if (hexMapped) {
    const hi = parseInt(hexMapped[1]!, 16);
    const lo = parseInt(hexMapped[2]!, 16);
    return isPublicAddress(`${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`);
  }
  return !blocked.check(ip, 'ipv6');
}
