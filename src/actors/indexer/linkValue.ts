import { Packr } from 'msgpackr';
import type { LinkFeatures } from '../messages.js';

const packr = new Packr({ useRecords: false });

/**
 * The value of a link in `outlinks` and `backlinks`: the link's raw weight as a float64 LE
 * (from the weight function at index time, not normalised), then msgpack `LinkFeatures`.
 * The metric traversal reads only the first 8 bytes.
 */
export function encodeLinkValue(weight: number, features: LinkFeatures): Buffer {
  const f = packr.pack(features);
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
