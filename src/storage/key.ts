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
  /** End offset of each key in `bytes`, non-decreasing. */
  readonly ends: Uint32Array;
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
  return packed.bytes.subarray(i === 0 ? 0 : packed.ends[i - 1]!, packed.ends[i]!);
}
