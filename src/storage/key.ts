import { nativeAddon } from './native.js';
/** Keys are bytes; strings are UTF-8. */
export type Key = Uint8Array | string;

/** The bytes of a key (a string is UTF-8 encoded; a Uint8Array is returned as is). */
export function keyBytes(key: Key): Uint8Array {
  return typeof key === 'string' ? Buffer.from(key, 'utf8') : key;
}

/**
 * Many keys in two typed arrays instead of one object each: key i is
 * `bytes[ends[i - 1] .. ends[i])` (with `ends[-1] = 0`). What `WriteBatch.mergeFloat64s`
 * takes for thousands of keys per call, and how the metric's contributions travel.
 */
export interface PackedKeys {
  readonly bytes: Uint8Array;
  /** End offset of each key in `bytes`, non-decreasing (unless `starts` is given). */
  readonly ends: Uint32Array;
  /**
   * Start offset of each key, when the keys are picked out of a larger buffer (a KeyArena),
   * in any order: key i is then `bytes[starts[i] .. ends[i])`. Accepted by
   * `WriteBatch.mergeFloat64s`; `gatherKeys` packs such keys contiguously.
   */
  readonly starts?: Uint32Array;
}

/** Packs `keys` (each copied once). */
export function packKeys(keys: readonly Uint8Array[]): PackedKeys {
  let total = 0;
  for (const k of keys) total += k.length;
  const bytes = Buffer.allocUnsafe(total);
  const ends = new Uint32Array(keys.length);
  let at = 0;
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i]!;
    bytes.set(k, at);
    at += k.length;
    ends[i] = at;
  }
  return { bytes, ends };
}

/** Key i of `packed` (a view, not a copy). */
export function packedKey(packed: PackedKeys, i: number): Uint8Array {
  const start = packed.starts ? packed.starts[i]! : i === 0 ? 0 : packed.ends[i - 1]!;
  return packed.bytes.subarray(start, packed.ends[i]!);
}

/**
 * The keys `bytes[starts[i] .. ends[i])` packed one after another (what a message carries),
 * copied in one native call.
 * @throws InvalidArgumentError when an offset is out of `bytes` or a start passes its end
 */
export function gatherKeys(bytes: Uint8Array, starts: Uint32Array, ends: Uint32Array): PackedKeys {
  const packed = nativeAddon().gatherKeys(bytes, starts, ends);
  const out = new Uint32Array(ends.length);
  let at = 0;
  for (let i = 0; i < ends.length; i++) out[i] = at += ends[i]! - starts[i]!;
  return { bytes: packed, ends: out };
}
