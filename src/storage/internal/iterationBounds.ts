import type { Key } from '../key.js';
import { keyBytes } from '../key.js';

/** The bound options of an iteration (see IterateOptions in ../iteration.ts). */
export interface BoundOptions {
  gt?: Key;
  gte?: Key;
  lt?: Key;
  lte?: Key;
  prefix?: Key;
}

/**
 * Turns gt/gte/lt/lte/prefix into one inclusive lower and one exclusive upper bound, the
 * only bounds the native iterator knows. `gt: k` is `lower: k + 0x00` and `lte: k` is
 * `upper: k + 0x00` (k + 0x00 is the next key after k in bytewise order); a prefix p is
 * [p, successor(p)) where successor increments the last byte below 0xff. When several
 * options are given, all of them apply (the tightest bounds win). `empty` is true when
 * no key can match.
 */
export function iterationBounds(o: BoundOptions): { lower?: Buffer; upper?: Buffer; empty: boolean } {
  let lower: Buffer | undefined;
  let upper: Buffer | undefined;
  const raiseLower = (b: Buffer) => {
    if (lower === undefined || Buffer.compare(b, lower) > 0) lower = b;
  };
  const lowerUpper = (b: Buffer) => {
    if (upper === undefined || Buffer.compare(b, upper) < 0) upper = b;
  };
  const bytes = (k: Key) => Buffer.from(keyBytes(k));
  if (o.gte !== undefined) raiseLower(bytes(o.gte));
  if (o.gt !== undefined) raiseLower(Buffer.concat([bytes(o.gt), Buffer.of(0)]));
  if (o.lt !== undefined) lowerUpper(bytes(o.lt));
  if (o.lte !== undefined) lowerUpper(Buffer.concat([bytes(o.lte), Buffer.of(0)]));
  if (o.prefix !== undefined) {
    const p = bytes(o.prefix);
    raiseLower(p);
    const next = prefixSuccessor(p);
    if (next !== undefined) lowerUpper(next);
  }
  const empty = lower !== undefined && upper !== undefined && Buffer.compare(lower, upper) >= 0;
  return { lower, upper, empty };
}

/** The smallest key greater than every key starting with `p`, or undefined (p is all 0xff). */
function prefixSuccessor(p: Buffer): Buffer | undefined {
  let end = p.length;
  while (end > 0 && p[end - 1] === 0xff) end--;
  if (end === 0) return undefined;
  const next = Buffer.from(p.subarray(0, end));
  next[end - 1] += 1;
  return next;
}
