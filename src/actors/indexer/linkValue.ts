import { Packr } from 'msgpackr';
import type { LinkFeatures } from '../messages.js';

const packr = new Packr({ useRecords: false });

/**
 * The value of a link in `outlinks` and `backlinks`: the link's raw weight as a float64 LE
 * (from the weight function at index time, not normalised), then msgpack `LinkFeatures`.
 * The metric traversal reads only the first 8 bytes.
 */
export function encodeLinkValue(weight: number, features: LinkFeatures): Buffer {
  const f = packedFeatures(features);
  const out = Buffer.allocUnsafe(8 + f.length);
  out.writeDoubleLE(weight, 0);
  f.copy(out, 8);
  return out;
}

/** The raw weight of a link value. */
export function linkWeight(value: Uint8Array): number {
  return Buffer.from(value.buffer, value.byteOffset, value.byteLength).readDoubleLE(0);
}

/** The features of a link value. */
export function linkFeatures(value: Uint8Array): LinkFeatures {
  return packr.unpack(value.subarray(8)) as LinkFeatures;
}

/**
 * msgpack of `features`, memoised for the recent distinct feature sets: links of graph
 * files and of navigation repeat the same features many times. Bounded (1024 entries,
 * cleared when full).
 */
const memo = new Map<string, Buffer>();
function packedFeatures(f: LinkFeatures): Buffer {
  const key = `${f.anchor}\u0000${f.position}\u0000${f.rel.join(' ')}\u0000${f.sameHost ? 1 : 0}\u0000${f.region}`;
  let packed = memo.get(key);
  if (!packed) {
    if (memo.size >= 1024) memo.clear();
    packed = packr.pack(f);
    memo.set(key, packed);
  }
  return packed;
}
