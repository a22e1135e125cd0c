import { Packr } from 'msgpackr';
import type { LinkFeatures } from '../messages.js';

const packr = new Packr({ useRecords: false });

/**
 * The value of a link in `outlinks` and `backlinks`: the link's raw weight as a float64 LE
 * (from the weight function at index time, not normalised), then msgpack `LinkFeatures`.
 * The metric traversal reads only the first 8 bytes. Memoised for the recent distinct
 * (weight, features) pairs, since links repeat them (graph files, navigation): the Buffer
 * returned may be shared, so it must not be modified.
 */
export function encodeLinkValue(weight: number, features: LinkFeatures): Buffer {
  // The same features object (graph files' links share one per message and flag:
  // `graphPage`, and the codecs keep that sharing) is looked up by identity, without
  // building its string key (that key was 5% of a cnr-2000 load's main thread).
  const same = byObject.get(features);
  if (same !== undefined && same.weight === weight) return same.value;
  const key = `${weight}\u0000${featuresKey(features)}`;
  let out = memo.get(key);
  if (!out) {
    const f = packr.pack(features);
    out = Buffer.allocUnsafe(8 + f.length);
    out.writeDoubleLE(weight, 0);
    f.copy(out, 8);
    if (memo.size >= 1024) memo.clear();
    memo.set(key, out);
  }
  byObject.set(features, { weight, value: out });
  return out;
}

/** The last value encoded for a features object, by identity (weak: kept while the object lives). */
const byObject = new WeakMap<LinkFeatures, { readonly weight: number; readonly value: Buffer }>();

/** The raw weight of a link value. */
export function linkWeight(value: Uint8Array): number {
  return linkWeightAt(Buffer.from(value.buffer, value.byteOffset, value.byteLength), 0);
}

/** The raw weight of the link value that starts at `offset` of `bytes` (a raw chunk's values, read in place). */
export function linkWeightAt(bytes: Buffer, offset: number): number {
  return bytes.readDoubleLE(offset);
}

/** The features of a link value. */
export function linkFeatures(value: Uint8Array): LinkFeatures {
  return packr.unpack(value.subarray(8)) as LinkFeatures;
}

/** Link values by weight and features (bounded: 1024 entries, cleared when full). */
const memo = new Map<string, Buffer>();

/**
 * A string that is equal for two `LinkFeatures` exactly when they are equal (every field,
 * occurrences included).
 */
export function featuresKey(f: LinkFeatures): string {
  const flags = `${f.sameHost ? 1 : 0}${f.sameSite === undefined ? '-' : f.sameSite ? 1 : 0}${f.selfLink ? 1 : 0}${f.redirect ?? ''}`;
  const one = (o: { anchor: string; position: number; rel: readonly string[]; region: string }) => `${o.anchor}\u0000${o.position}\u0000${o.rel.join(' ')}\u0000${o.region}`;
  return f.repeats?.length ? `${flags}\u0001${[f, ...f.repeats].map(one).join('\u0001')}` : `${flags}\u0001${one(f)}`;
}
