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
 * Encodings (numbers little-endian):
 *   int64Add       value/operand: 8-byte int64; operands add (negative allowed, wraps at 2^64)
 *   float64Add     value/operand: N >= 1 float64, element-wise add; a shorter operand adds to
 *                  the first elements; the result is as long as the longest. Ranks: value
 *                  [x, r], a push writes [r, -r], a contribution writes [0, c]
 *   max / min      value/operand: exactly one float64 (no int64 variant); the largest /
 *                  smallest (NaN loses)
 *   lastWriteWins  value/operand: 8-byte int64 timestamp (ms) + payload; the larger
 *                  timestamp wins, ties go to the later write; an empty payload is a tombstone
 *   set            entries [tag u8: 1 add, 2 remove][LEB128 length][member]; a value holds
 *                  the members, sorted bytewise
 *   record         msgpack maps; each field merges by its rule (sum, max, min, lww, set)
 *
 * The encode/decode helpers below write and read these layouts.
 */

import { Packr } from 'msgpackr';
import type { Key } from '../storage/key.js';
import { keyBytes } from '../storage/key.js';

/** A merge operator declaration as the native layer reads it. */
export interface MergeOperatorSpec {
  readonly name: string;
  /** record only: field name -> rule. */
  readonly fields?: Readonly<Record<string, FieldRule>>;
  /** record only: rule of fields not listed (default 'lww'). */
  readonly defaultRule?: FieldRule;
}

/**
 * How one field of a record merges:
 * - `sum`: numbers add (ints stay ints until they overflow int64; any float makes a float)
 * - `max` / `min`: numeric maximum / minimum
 * - `lww`: the later write wins (write order), whatever the type, null included
 * - `set`: an array used as a set; an operand gives an array (adds) or `{ add, remove }`
 *   ({@link recordSetOps})
 * A field value that does not fit its rule (a string under `sum`) is skipped and counted
 * as a merge fault; the rest of the operand still applies.
 */
export type FieldRule = 'sum' | 'max' | 'min' | 'lww' | 'set';

/** `shardflow.int64_add.v1`: 8-byte LE int64 counters; operands add. Encode with {@link encodeInt64}. */
export const int64Add = () => ({ name: 'shardflow.int64_add.v1' }) as const;

/**
 * `shardflow.float64_add.v1`: vectors of LE float64, element-wise add; the result has the
 * length of the longest input. Encode with {@link encodeFloat64s}.
 */
export const float64Add = () => ({ name: 'shardflow.float64_add.v1' }) as const;

/**
 * `shardflow.float64_max.v1`: keeps the largest value. Float64 only: the value and each operand
 * are exactly one 8-byte LE float64, written with `encodeFloat64s(x)` (one number) and read
 * with `decodeFloat64s(v)[0]`; an int64 operand from {@link encodeInt64}, or a vector of two
 * or more numbers, is malformed (skipped and counted in `mergeFaults`). Integers up to 2^53
 * are exact as float64. There is no int64 max/min operator (native/src/merge/ has only the
 * float64 pair); for integers, a {@link record} field with the `'max'` rule compares two
 * msgpack integers as int64. A NaN loses against any number (C++ `std::fmax`).
 */
export const max = () => ({ name: 'shardflow.float64_max.v1' }) as const;

/**
 * `shardflow.float64_min.v1`: keeps the smallest value. Float64 only, like {@link max}: one
 * 8-byte LE float64 per value and operand, written with `encodeFloat64s(x)`; an int64 operand
 * is malformed (skipped and counted); for an integer minimum use a {@link record} field with
 * the `'min'` rule. A NaN loses against any number (C++ `std::fmin`).
 */
export const min = () => ({ name: 'shardflow.float64_min.v1' }) as const;

/**
 * `shardflow.lww.v1`: last write wins by timestamp. Encode with {@link encodeLww}; an
 * empty payload ({@link lwwTombstone}) marks a deletion that the `tombstones` compaction
 * filter drops after a grace period.
 */
export const lastWriteWins = () => ({ name: 'shardflow.lww.v1' }) as const;

/** `shardflow.set.v1`: a set of byte strings. Operands from {@link encodeSetOps}; read with {@link decodeSet}. */
export const set = () => ({ name: 'shardflow.set.v1' }) as const;

/**
 * `shardflow.record.v1`: msgpack records merged field by field.
 * @param fields rule per field name; fields not listed use `options.defaultRule` ('lww')
 * @example
 * pages: { mergeOperator: record({ lastSeen: 'max', fetchCount: 'sum', tags: 'set' }) }
 * await store.merge('pages', url, encodeRecord({ lastSeen: now, fetchCount: 1, status: 200 }));
 */
export const record = (fields: Readonly<Record<string, FieldRule>>, options?: { readonly defaultRule?: FieldRule }): MergeOperatorSpec =>
  options?.defaultRule
    ? { name: 'shardflow.record.v1', fields: { ...fields }, defaultRule: options.defaultRule }
    : { name: 'shardflow.record.v1', fields: { ...fields } };

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

/**
 * Variadic: `encodeFloat64s(a, b, ...)` writes its N >= 1 number arguments as N little-endian
 * float64 (8 N bytes), in order. Pass numbers, not an array: `encodeFloat64s(x)` for a
 * {@link max} / {@link min} operand (one number), `encodeFloat64s(x, r)` for a two-element
 * {@link float64Add} vector; spread an array with `encodeFloat64s(...values)` (or, for many
 * keys, `WriteBatch.mergeFloat64s`, which takes a `Float64Array` without a Buffer per operand).
 * @throws RangeError when called with no number
 */
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

/** A last-write-wins value/operand: 8-byte LE int64 timestamp (ms), then the payload. */
export function encodeLww(timestampMs: bigint | number, payload: Uint8Array): Buffer {
  return Buffer.concat([encodeInt64(timestampMs), payload]);
}

/** A last-write-wins tombstone: the timestamp and no payload. */
export function lwwTombstone(timestampMs: bigint | number): Buffer {
  return encodeInt64(timestampMs);
}

/**
 * Splits a last-write-wins value. `payload` views `buf`; `tombstone` when it is empty.
 * @throws RangeError when shorter than 8 bytes
 */
export function decodeLww(buf: Uint8Array): { timestampMs: bigint; payload: Buffer; tombstone: boolean } {
  if (buf.byteLength < 8) throw new RangeError(`a last-write-wins value has >= 8 bytes, got ${buf.byteLength}`);
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  const payload = b.subarray(8);
  return { timestampMs: b.readBigInt64LE(0), payload, tombstone: payload.length === 0 };
}

const SET_ADD = 1;
const SET_REMOVE = 2;

/** A set operand: adds, then removes, applied in that order. Strings are UTF-8. */
export function encodeSetOps(ops: { add?: readonly Key[]; remove?: readonly Key[] }): Buffer {
  const parts: Buffer[] = [];
  const entry = (tag: number, member: Key) => {
    const bytes = keyBytes(member);
    const head = [tag];
    let n = bytes.byteLength;
    while (n >= 0x80) {
      head.push((n & 0x7f) | 0x80);
      n = Math.floor(n / 128);
    }
    head.push(n);
    parts.push(Buffer.from(head), Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  };
  for (const m of ops.add ?? []) entry(SET_ADD, m);
  for (const m of ops.remove ?? []) entry(SET_REMOVE, m);
  return Buffer.concat(parts);
}

/** Members of a set value (sorted bytewise), as Buffers viewing `buf`. @throws RangeError when malformed */
export function decodeSet(buf: Uint8Array): Buffer[] {
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  const out: Buffer[] = [];
  let p = 0;
  while (p < b.length) {
    const tag = b[p++];
    let len = 0;
    let scale = 1;
    for (;;) {
      if (p >= b.length) throw new RangeError('truncated set entry');
      const byte = b[p++]!;
      len += (byte & 0x7f) * scale;
      scale *= 128;
      if ((byte & 0x80) === 0) break;
    }
    if (p + len > b.length) throw new RangeError('truncated set member');
    if (tag === SET_ADD) out.push(b.subarray(p, p + len));
    else if (tag !== SET_REMOVE) throw new RangeError(`unknown set entry tag ${tag}`);
    p += len;
  }
  return out;
}

// msgpack without msgpackr's record extension, so the native reader sees plain maps.
const packr = new Packr({ useRecords: false, moreTypes: false });

/** A record value/operand: a msgpack map. */
export function encodeRecord(fields: Readonly<Record<string, unknown>>): Buffer {
  return packr.pack(fields);
}

/** Reads a record value. */
export function decodeRecord<T = Record<string, unknown>>(buf: Uint8Array): T {
  return packr.unpack(buf) as T;
}

/** The operand form of a `set` field that both adds and removes. */
export function recordSetOps<T>(ops: { add?: readonly T[]; remove?: readonly T[] }): { add: T[]; remove: T[] } {
  return { add: [...(ops.add ?? [])], remove: [...(ops.remove ?? [])] };
}
