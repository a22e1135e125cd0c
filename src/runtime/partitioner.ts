import { InvalidUrlError } from '../errors.js';
import { partitionId, type PartitionId } from './ids.js';

/**
 * Partitioning: 32-bit FNV-1a (Fowler, Noll, Vo; http://www.isthe.com/chongo/tech/comp/fnv/,
 * offset basis 2166136261, prime 16777619) over the UTF-8 bytes of a key, modulo the
 * partition count. FNV-1a is stable (no seed, no platform dependence) and spreads short,
 * similar strings such as host names well, so the same key lands on the same partition in
 * every process. `hostOf` gives the key that places every URL of a host together.
 */

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;
const encoder = new TextEncoder();

/**
 * 32-bit FNV-1a of the UTF-8 bytes of `text`, as an unsigned integer. ASCII text (every
 * host name in IDNA form) is hashed from its char codes, which are its UTF-8 bytes, without
 * encoding it first; other text is encoded.
 */
export function fnv1a32(text: string): number {
  let hash = FNV_OFFSET;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c > 0x7f) return fnv1a32Utf8(text);
    hash ^= c;
    hash = Math.imul(hash, FNV_PRIME) >>> 0;
  }
  return hash >>> 0;
}

function fnv1a32Utf8(text: string): number {
  const bytes = encoder.encode(text);
  let hash = FNV_OFFSET;
  for (let i = 0; i < bytes.length; i++) {
    hash ^= bytes[i]!;
    hash = Math.imul(hash, FNV_PRIME) >>> 0;
  }
  return hash >>> 0;
}

/**
 * The host part of an absolute URL, lower-cased, with `:port` kept when given.
 *
 * Lenient on purpose: graphs in the wild hold URLs that WHATWG `URL` rejects
 * (`http://www.oznet.ksu.edu>/` in the EPA graph), and such a page still needs a home.
 * The host is the text between `//` and the next `/`, `?` or `#`, without userinfo.
 *
 * Remembers the last URL's authority, `scheme://host` with the `/`, `?`, `#` or `\\` that
 * ends it: a URL that starts with it has the same host, returned without a scan (links are
 * mostly to the linking page's host, so a load or an indexer asks for one host many times
 * in a row; 4% of a cnr-2000 load's main thread went to `hostOf`).
 * @throws InvalidUrlError when the URL has no `scheme://host` part.
 */
export function hostOf(url: string): string {
  if (lastAuthority !== undefined && url.startsWith(lastAuthority)) return lastHost;
  const start = url.indexOf('//');
  if (start < 0 || start === 0 || url[start - 1] !== ':') throw new InvalidUrlError(url, 'URL has no scheme://host');
  let end = url.length;
  for (let i = start + 2; i < url.length; i++) {
    const c = url.charCodeAt(i);
    if (c === 47 /* / */ || c === 63 /* ? */ || c === 35 /* # */ || c === 92 /* \ */) { end = i; break; }
  }
  let host = url.slice(start + 2, end);
  const at = host.lastIndexOf('@');
  if (at >= 0) host = host.slice(at + 1);
  if (host.length === 0) throw new InvalidUrlError(url, 'URL has an empty host');
  host = host.toLowerCase();
  // Only an authority closed by its delimiter: `http://a.b` is a prefix of `http://a.bc/`.
  // (The first `//` of a URL that starts with it is the same, and so is the host's end.)
  if (end < url.length) {
    lastAuthority = url.slice(0, end + 1);
    lastHost = host;
  }
  return host;
}

/** The authority (with its closing delimiter) and host of the last URL `hostOf` scanned. */
let lastAuthority: string | undefined;
let lastHost = '';

/**
 * Partitioning by any string key: what a topology's namespaces use. `forKey(key)` is the
 * 32-bit FNV-1a modulo N as above (`hostOf(url)` as the key function places
 * every URL of a host on one partition), `describe()` is `fnv1a/N` and is recorded in each stage
 * store's `sf.meta` so that a store opened under another scheme is refused.
 */
export interface KeyPartitioner {
  /** Number of partitions, >= 1. */
  readonly partitions: number;
  /** Partition that owns `key` (its UTF-8 bytes are hashed). */
  forKey(key: string): PartitionId;
  /** A stable description such as `fnv1a/8`. */
  describe(): string;
}

/** The FNV-1a key partitioner. @throws RangeError when `partitions` is not an integer >= 1. */
export function keyPartitioner(partitions: number): KeyPartitioner {
  if (!Number.isInteger(partitions) || partitions < 1) throw new RangeError(`partitions must be an integer >= 1, got ${partitions}`);
  return Object.freeze({
    partitions,
    forKey: (key: string) => partitionId(fnv1a32(key) % partitions),
    describe: () => `fnv1a/${partitions}`,
  });
}
