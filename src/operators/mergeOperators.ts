/**
 * Merge operators, declared by name: the code runs in C++ (native/src/merge/), inside
 * RocksDB reads and compactions, never in JS. A column family picks one at open
 * (`columnFamilies: { counts: { mergeOperator: int64Add() } }`); `store.merge(cf, key,
 * operand)` then folds the operand into the value without a read.
 *
 * Names are versioned (`shardflow.int64_add.v1`) and recorded in the store: reopening a
 * column family with another operator fails with MergeOperatorMismatchError, an unknown
 * name with UnknownMergeOperatorError, both before any write. A name never changes
 * meaning; a new encoding gets `.v2`.
 *
 * Malformed operands never fail a read or a compaction: the operator keeps the last good
 * value and counts a fault (`store.stats().mergeFaults`).
 *
 * Encodings (all little-endian):
 *   int64Add     value/operand: 8-byte int64; operands add (negative allowed, wraps at 2^64)
 *   float64Add   value/operand: N >= 1 float64, element-wise add; a shorter operand adds to
 *                the first elements; the result is as long as the longest. Ranks: value
 *                [x, r], a push writes [r, -r], a contribution writes [0, c]
 *
 * The encode/decode helpers below write and read these layouts.
 */

/** A merge operator declaration as the native layer reads it. */
export interface MergeOperatorSpec {
  readonly name: string;
}

/** `shardflow.int64_add.v1`: 8-byte LE int64 counters; operands add. Encode with {@link encodeInt64}. */
export const int64Add = () => ({ name: 'shardflow.int64_add.v1' }) as const;

/**
 * `shardflow.float64_add.v1`: vectors of LE float64, element-wise add; the result has the
 * length of the longest input. Encode with {@link encodeFloat64s}.
 */
export const float64Add = () => ({ name: 'shardflow.float64_add.v1' }) as const;

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/**
 * 8-byte little-endian int64.
 * @param n a safe integer or a bigint within int64
 * @throws RangeError outside int64 (or for a non-integer number)
 */
export function encodeInt64(n: bigint | number): Buffer {
  const v = typeof n === 'bigint' ? n : BigInt(checkSafeInteger(n));
  if (v < INT64_MIN || v > INT64_MAX) throw new RangeError(`${v} is outside int64`);
  const buf = Buffer.allocUnsafe(8);
  buf.writeBigInt64LE(v);
  return buf;
}

/** Reads an 8-byte little-endian int64. @throws RangeError unless `buf` has 8 bytes. */
export function decodeInt64(buf: Uint8Array): bigint {
  if (buf.byteLength !== 8) throw new RangeError(`an int64 has 8 bytes, got ${buf.byteLength}`);
  return Buffer.from(buf.buffer, buf.byteOffset, 8).readBigInt64LE();
}

/** N little-endian float64 (N >= 1). */
export function encodeFloat64s(...xs: number[]): Buffer {
  if (xs.length === 0) throw new RangeError('encodeFloat64s needs at least one number');
  const buf = Buffer.allocUnsafe(8 * xs.length);
  for (let i = 0; i < xs.length; i++) buf.writeDoubleLE(xs[i]!, 8 * i);
  return buf;
}

/** Reads N little-endian float64 (a copy). @throws RangeError unless the length is a multiple of 8. */
export function decodeFloat64s(buf: Uint8Array): Float64Array {
  if (buf.byteLength % 8 !== 0) throw new RangeError(`float64 vectors have a multiple of 8 bytes, got ${buf.byteLength}`);
  const out = new Float64Array(buf.byteLength / 8);
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  for (let i = 0; i < out.length; i++) out[i] = view.getFloat64(8 * i, true);
  return out;
}

function checkSafeInteger(n: number): number {
  if (!Number.isSafeInteger(n)) throw new RangeError(`${n} is not a safe integer; pass a bigint`);
  return n;
}
